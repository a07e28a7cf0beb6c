// Saves checkpoints in a loop until killed (saver_crash_test.cc): step s
// writes w (4M floats, every element s) and step (s), s = START, START+1,
// ... into DIR.
//   saver_crash_helper DIR START
#include <cstdlib>
#include <iostream>
#include <string>

#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/ops.h"

int main(int argc, char** argv) {
  using namespace graphrun;
  using namespace graphrun::client;
  if (argc != 3) {
    std::cerr << "usage: saver_crash_helper DIR START\n";
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t start = std::atoll(argv[2]);
  constexpr int64_t kElements = int64_t{4} << 20;
  Scope root = Scope::NewRootScope();
  Variable w(root.WithOpName("w"), PartialShape({kElements}), DT_FLOAT);
  Variable step(root.WithOpName("step"), PartialShape({}), DT_INT64);
  auto value = ops::Placeholder(root.WithOpName("value"), DT_FLOAT);
  auto at = ops::Placeholder(root.WithOpName("at"), DT_INT64);
  Operation set_w = w.Assign(root, value);
  Operation set_step = step.Assign(root, at);
  auto saver = Saver::Create(root, {w, step}, SaverOptions{3});
  if (!saver.ok()) {
    std::cerr << saver.status() << "\n";
    return 1;
  }
  ClientSession session(root);
  Tensor t(DT_FLOAT, TensorShape({kElements}));
  for (int64_t s = start;; ++s) {
    float* p = t.base<float>();
    for (int64_t i = 0; i < kElements; ++i) p[i] = static_cast<float>(s);
    auto r = session.Run({{value, t}, {at, Tensor::Scalar<int64_t>(s)}}, {}, {set_w, set_step});
    if (!r.ok()) {
      std::cerr << r.status() << "\n";
      return 1;
    }
    auto saved = saver->Save(session, dir, s);
    if (!saved.ok()) {
      std::cerr << saved.status() << "\n";
      return 1;
    }
  }
}
