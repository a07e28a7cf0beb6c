// gpu_benchmark in a build without --config=cuda.
#include <cstdio>

int main() {
  std::printf("gpu_benchmark: built without --config=cuda\n");
  return 1;
}
