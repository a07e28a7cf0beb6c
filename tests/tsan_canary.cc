// A data race on purpose, for scripts/test_all.sh's TSan stage: built with
// --config=tsan and run with the stage's TSAN_OPTIONS and suppressions, it
// must be reported. If it is not, the stage's build flags, options or
// suppressions have stopped TSan from seeing graphrun's own code, and the
// stage's green result would mean nothing.
#include <cstdio>
#include <thread>

namespace {

int shared_counter = 0;  // written by two threads without a lock

void Bump() {
  for (int i = 0; i < 1000; ++i) shared_counter = shared_counter + 1;
}

}  // namespace

int main() {
  std::thread a(Bump), b(Bump);
  a.join();
  b.join();
  std::printf("%d\n", shared_counter);
  return 0;
}
