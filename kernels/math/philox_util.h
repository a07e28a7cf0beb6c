// Philox4x32-10 counter-based random numbers and the distributions
// TensorFlow builds on them (tensorflow/core/lib/random/philox_random.h,
// random_distributions.h), reproduced bit for bit so that a GraphDef with
// fixed seeds yields TensorFlow's values:
//
//   * PhiloxRandom(seed, seed2): key = seed (lo, hi words), counter words
//     2..3 = seed2; each call returns 4 uint32 and advances the counter by 1.
//   * uniform float: 23 random mantissa bits under exponent 127, minus 1.
//   * normal: Box-Muller on two uniforms (epsilon 1e-7 guard, sincos).
//   * truncated normal: normal pairs, rejecting |x| >= 2.
//
// Only integer arithmetic and libm (log, sqrt, sincos) are used, so values
// are the same on every machine with the same libm (no std:: distributions,
// whose algorithms are implementation-defined).
//
// Thread-safety: PhiloxRandom is a value type; GuardedPhilox is thread-safe.
#ifndef GRAPHRUN_KERNELS_MATH_PHILOX_UTIL_H_
#define GRAPHRUN_KERNELS_MATH_PHILOX_UTIL_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>

namespace graphrun {
namespace random {

class PhiloxRandom {
 public:
  static constexpr int kResultElementCount = 4;
  using ResultType = std::array<uint32_t, 4>;
  using Key = std::array<uint32_t, 2>;

  PhiloxRandom() = default;
  // As TensorFlow's PhiloxRandom(seed_lo, seed_hi).
  PhiloxRandom(uint64_t seed_lo, uint64_t seed_hi) {
    key_[0] = static_cast<uint32_t>(seed_lo);
    key_[1] = static_cast<uint32_t>(seed_lo >> 32);
    counter_[2] = static_cast<uint32_t>(seed_hi);
    counter_[3] = static_cast<uint32_t>(seed_hi >> 32);
  }
  PhiloxRandom(const ResultType& counter, const Key& key) : counter_(counter), key_(key) {}

  // Advances the 128-bit counter by `count` (each unit is one 4x32 block).
  void Skip(uint64_t count) {
    const uint32_t count_lo = static_cast<uint32_t>(count);
    uint32_t count_hi = static_cast<uint32_t>(count >> 32);
    counter_[0] += count_lo;
    if (counter_[0] < count_lo) ++count_hi;
    counter_[1] += count_hi;
    if (counter_[1] < count_hi) {
      if (++counter_[2] == 0) ++counter_[3];
    }
  }

  // The next 4 random words.
  ResultType operator()() {
    ResultType counter = counter_;
    Key key = key_;
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        key[0] += kW32A;
        key[1] += kW32B;
      }
      counter = SingleRound(counter, key);
    }
    SkipOne();
    return counter;
  }

  const ResultType& counter() const { return counter_; }
  const Key& key() const { return key_; }

 private:
  static constexpr uint32_t kW32A = 0x9E3779B9;
  static constexpr uint32_t kW32B = 0xBB67AE85;
  static constexpr uint32_t kM4x32A = 0xD2511F53;
  static constexpr uint32_t kM4x32B = 0xCD9E8D57;

  static ResultType SingleRound(const ResultType& c, const Key& k) {
    const uint64_t p0 = static_cast<uint64_t>(kM4x32A) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM4x32B) * c[2];
    ResultType r;
    r[0] = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
    r[1] = static_cast<uint32_t>(p1);
    r[2] = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
    r[3] = static_cast<uint32_t>(p0);
    return r;
  }
  void SkipOne() {
    if (++counter_[0] == 0 && ++counter_[1] == 0 && ++counter_[2] == 0) {
      ++counter_[3];
    }
  }

  ResultType counter_{};
  Key key_{};
};

// Draws one word at a time from a PhiloxRandom (TF's SingleSampleAdapter).
class SingleSampleAdapter {
 public:
  explicit SingleSampleAdapter(PhiloxRandom* gen) : gen_(gen) {}
  uint32_t operator()() {
    if (used_ == PhiloxRandom::kResultElementCount) {
      buf_ = (*gen_)();
      used_ = 0;
    }
    return buf_[used_++];
  }

 private:
  PhiloxRandom* gen_;
  PhiloxRandom::ResultType buf_{};
  int used_ = PhiloxRandom::kResultElementCount;
};

// A uniform float in [0, 1) from the low 23 bits of `x`.
inline float Uint32ToFloat(uint32_t x) {
  const uint32_t val = (127u << 23) | (x & 0x7fffffu);
  float f;
  std::memcpy(&f, &val, sizeof(f));
  return f - 1.0f;
}

// A uniform double in [0, 1) from 52 bits of (x0, x1).
inline double Uint64ToDouble(uint32_t x0, uint32_t x1) {
  const uint64_t man = (static_cast<uint64_t>(x0 & 0xfffffu) << 32) | static_cast<uint64_t>(x1);
  const uint64_t val = (uint64_t{1023} << 52) | man;
  double d;
  std::memcpy(&d, &val, sizeof(d));
  return d - 1.0;
}

// Uniform half / bfloat16 in [0, 1), as IEEE bits: 10 (7) random mantissa
// bits; the subtraction of 1 is exact, so it is done in float.
inline float HalfUniformAsFloat(uint32_t x) { return static_cast<float>(x & 0x3ffu) / 1024.0f; }
inline float BFloat16UniformAsFloat(uint32_t x) { return static_cast<float>(x & 0x7fu) / 128.0f; }

inline void BoxMullerFloat(uint32_t x0, uint32_t x1, float* f0, float* f1) {
  const float epsilon = 1.0e-7f;
  float u1 = Uint32ToFloat(x0);
  if (u1 < epsilon) u1 = epsilon;
  // TF computes 2 * M_PI * u in double and narrows to float.
  const float v1 = static_cast<float>(2.0f * M_PI * Uint32ToFloat(x1));
  const float u2 = std::sqrt(-2.0f * std::log(u1));
  ::sincosf(v1, f0, f1);
  *f0 *= u2;
  *f1 *= u2;
}

inline void BoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double* d0,
                            double* d1) {
  const double epsilon = 1.0e-7;
  double u1 = Uint64ToDouble(x0, x1);
  if (u1 < epsilon) u1 = epsilon;
  const double v1 = 2 * M_PI * Uint64ToDouble(x2, x3);
  const double u2 = std::sqrt(-2.0 * std::log(u1));
  ::sincos(v1, d0, d1);
  *d0 *= u2;
  *d1 *= u2;
}

// TensorFlow's GuardedPhiloxRandom: a kernel's generator, advanced under a
// lock by every run so successive runs continue the stream.
class GuardedPhilox {
 public:
  // Seeds as TF: both zero means nondeterministic seeds.
  void Init(int64_t seed, int64_t seed2) {
    if (seed == 0 && seed2 == 0) {
      std::random_device rd;
      auto next64 = [&rd] {
        return (static_cast<uint64_t>(rd()) << 32) | static_cast<uint64_t>(rd());
      };
      seed = static_cast<int64_t>(next64());
      seed2 = static_cast<int64_t>(next64());
    }
    std::lock_guard<std::mutex> l(mu_);
    gen_ = PhiloxRandom(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
  }
  // A generator positioned for `samples` 128-bit blocks; the shared state
  // moves past them.
  PhiloxRandom ReserveSamples128(uint64_t samples) {
    std::lock_guard<std::mutex> l(mu_);
    PhiloxRandom local = gen_;
    gen_.Skip(samples);
    return local;
  }
  // TF reserves output_count * multiplier blocks per run (multiplier 256 in
  // the random ops), so the stream position depends only on sizes run.
  PhiloxRandom ReserveRandomOutputs(int64_t output_count, int multiplier) {
    return ReserveSamples128(static_cast<uint64_t>(output_count) *
                             static_cast<uint64_t>(multiplier));
  }

 private:
  std::mutex mu_;
  PhiloxRandom gen_;
};

}  // namespace random
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_MATH_PHILOX_UTIL_H_
