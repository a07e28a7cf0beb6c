// CPU kernels for TensorFlow's stateful random ops, reproducing
// tensorflow/core/kernels/random_op.cc: one GuardedPhilox per kernel, seeded
// from the seed/seed2 attrs; each run reserves output_size * 256 Philox
// blocks, so successive runs continue the stream exactly as TF does. The
// output is filled in groups (4 floats / 2 doubles per Philox block), group
// g using the generator skipped by g blocks, so sharding across threads
// cannot change the values.
#include <algorithm>
#include <vector>

#include "kernels/framework/array_util.h"
#include "kernels/math/philox_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

using random::PhiloxRandom;

// TF's multiplier in ReserveRandomOutputs for these ops.
constexpr int kReservedSamplesPerOutput = 256;

absl::StatusOr<TensorShape> ShapeInput(const OpKernel& k, const Tensor& t) {
  if (t.dims() != 1) {
    return k.Error(absl::StrCat("shape must be a vector of {int32,int64}, got shape ",
                                t.shape().DebugString()));
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> dims, array_util::IntValues(k, t, "shape"));
  auto s = TensorShape::Make(dims);
  if (!s.ok()) return k.Error(s.status().message());
  return *s;
}

// Generates `groups` groups of `group_size` values with `gen_group`, which
// writes up to `n` values of the group that starts at `gen`. Runs in shards
// on the intra-op pool.
template <typename GenGroup>
void FillGroups(OpKernelContext* ctx, const PhiloxRandom& base, int64_t size, int group_size,
                int64_t cost, const GenGroup& gen_group) {
  const int64_t groups = (size + group_size - 1) / group_size;
  auto work = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t off = g * group_size;
      gen_group(base, g, off, std::min<int64_t>(group_size, size - off));
    }
  };
  if (groups < 64) {
    work(0, groups);
  } else {
    ctx->intra_op_pool()->ParallelFor(groups, cost * group_size, work);
  }
}

enum class Dist { kUniform, kNormal, kTruncatedNormal };

// 32-bit floats and 16-bit floats (generated as float, then narrowed as TF
// narrows the float samples).
template <Dist D>
void GenFloatGroup(PhiloxRandom gen, int64_t group, float* out, int n) {
  float r[4];
  if constexpr (D == Dist::kTruncatedNormal) {
    // Variable samples per output: each group owns its own window of
    // kReservedSamplesPerOutput * 4 / 4 blocks.
    gen.Skip(static_cast<uint64_t>(group) * kReservedSamplesPerOutput);
    random::SingleSampleAdapter single(&gen);
    int idx = 0;
    while (idx < 4) {
      const uint32_t x0 = single(), x1 = single();
      float f[2];
      random::BoxMullerFloat(x0, x1, &f[0], &f[1]);
      for (float v : f) {
        if (std::fabs(v) < 2.0f && idx < 4) r[idx++] = v;
      }
    }
  } else {
    gen.Skip(static_cast<uint64_t>(group));
    const auto s = gen();
    if constexpr (D == Dist::kUniform) {
      for (int i = 0; i < 4; ++i) r[i] = random::Uint32ToFloat(s[i]);
    } else {
      random::BoxMullerFloat(s[0], s[1], &r[0], &r[1]);
      random::BoxMullerFloat(s[2], s[3], &r[2], &r[3]);
    }
  }
  std::copy(r, r + n, out);
}

template <Dist D>
void GenDoubleGroup(PhiloxRandom gen, int64_t group, double* out, int n) {
  double r[2];
  if constexpr (D == Dist::kTruncatedNormal) {
    // 2 doubles per group; TF skips group * 2 * 256 / 4 blocks.
    gen.Skip(static_cast<uint64_t>(group) * 2 * kReservedSamplesPerOutput / 4);
    random::SingleSampleAdapter single(&gen);
    int idx = 0;
    while (idx < 2) {
      const uint32_t x0 = single(), x1 = single(), x2 = single(), x3 = single();
      double d[2];
      random::BoxMullerDouble(x0, x1, x2, x3, &d[0], &d[1]);
      for (double v : d) {
        if (std::fabs(v) < 2.0 && idx < 2) r[idx++] = v;
      }
    }
  } else {
    gen.Skip(static_cast<uint64_t>(group));
    const auto s = gen();
    if constexpr (D == Dist::kUniform) {
      r[0] = random::Uint64ToDouble(s[0], s[1]);
      r[1] = random::Uint64ToDouble(s[2], s[3]);
    } else {
      random::BoxMullerDouble(s[0], s[1], s[2], s[3], &r[0], &r[1]);
    }
  }
  std::copy(r, r + n, out);
}

template <Dist D>
class PhiloxRandomOp : public OpKernel {
 public:
  explicit PhiloxRandomOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t seed = 0, seed2 = 0;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("seed", &seed));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("seed2", &seed2));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    generator_.Init(seed, seed2);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(TensorShape shape, ShapeInput(*this, ctx->input(0)));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t size = out->NumElements();
    const PhiloxRandom base = generator_.ReserveRandomOutputs(size, kReservedSamplesPerOutput);
    const int64_t cost = D == Dist::kUniform ? 5 : D == Dist::kNormal ? 70 : 90;
    switch (dtype_) {
      case DT_FLOAT: {
        float* p = out->base<float>();
        FillGroups(ctx, base, size, 4, cost,
                   [p](const PhiloxRandom& b, int64_t g, int64_t off, int64_t n) {
                     GenFloatGroup<D>(b, g, p + off, static_cast<int>(n));
                   });
        return absl::OkStatus();
      }
      case DT_DOUBLE: {
        double* p = out->base<double>();
        FillGroups(ctx, base, size, 2, cost,
                   [p](const PhiloxRandom& b, int64_t g, int64_t off, int64_t n) {
                     GenDoubleGroup<D>(b, g, p + off, static_cast<int>(n));
                   });
        return absl::OkStatus();
      }
      case DT_HALF:
      case DT_BFLOAT16: {
        const bool half = dtype_ == DT_HALF;
        uint16_t* p = out->base<uint16_t>();
        FillGroups(ctx, base, size, 4, cost,
                   [p, half](const PhiloxRandom& b, int64_t g, int64_t off, int64_t n) {
                     float f[4];
                     if constexpr (D == Dist::kUniform) {
                       // TF's half/bfloat16 uniform uses 10 / 7 mantissa
                       // bits of each word, not a narrowed float.
                       PhiloxRandom gen = b;
                       gen.Skip(static_cast<uint64_t>(g));
                       const auto s = gen();
                       for (int i = 0; i < 4; ++i) {
                         f[i] = half ? random::HalfUniformAsFloat(s[i])
                                     : random::BFloat16UniformAsFloat(s[i]);
                       }
                     } else {
                       GenFloatGroup<D>(b, g, f, 4);
                     }
                     for (int64_t i = 0; i < n; ++i) {
                       p[off + i] = half ? FloatToHalf(f[i]) : FloatToBFloat16(f[i]);
                     }
                   });
        return absl::OkStatus();
      }
      default:
        return Error(absl::StrCat("unsupported dtype ", DataTypeString(dtype_)));
    }
  }

 private:
  DataType dtype_ = DT_FLOAT;
  random::GuardedPhilox generator_;
};

template <typename IntType>
class RandomUniformIntOp : public OpKernel {
 public:
  explicit RandomUniformIntOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t seed = 0, seed2 = 0;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("seed", &seed));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("seed2", &seed2));
    generator_.Init(seed, seed2);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(TensorShape shape, ShapeInput(*this, ctx->input(0)));
    const Tensor& minval = ctx->input(1);
    const Tensor& maxval = ctx->input(2);
    if (minval.dims() != 0) {
      return Error(absl::StrCat("minval must be 0-D, got shape ", minval.shape().DebugString()));
    }
    if (maxval.dims() != 0) {
      return Error(absl::StrCat("maxval must be 0-D, got shape ", maxval.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t size = out->NumElements();
    // As TF: empty outputs are fine whatever the bounds.
    if (size == 0) return absl::OkStatus();
    const IntType lo = minval.scalar<IntType>();
    const IntType hi = maxval.scalar<IntType>();
    if (!(lo < hi)) return Error(absl::StrCat("Need minval < maxval: ", lo, " >= ", hi));
    const PhiloxRandom base = generator_.ReserveRandomOutputs(size, kReservedSamplesPerOutput);
    IntType* p = out->base<IntType>();
    if constexpr (sizeof(IntType) == 4) {
      const uint32_t range = static_cast<uint32_t>(hi) - static_cast<uint32_t>(lo);
      FillGroups(ctx, base, size, 4, 20,
                 [=](const PhiloxRandom& b, int64_t g, int64_t off, int64_t n) {
                   PhiloxRandom gen = b;
                   gen.Skip(static_cast<uint64_t>(g));
                   const auto s = gen();
                   for (int64_t i = 0; i < n; ++i) {
                     p[off + i] = static_cast<IntType>(static_cast<uint32_t>(lo) + s[i] % range);
                   }
                 });
    } else {
      const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
      FillGroups(
          ctx, base, size, 2, 20, [=](const PhiloxRandom& b, int64_t g, int64_t off, int64_t n) {
            PhiloxRandom gen = b;
            gen.Skip(static_cast<uint64_t>(g));
            const auto s = gen();
            for (int64_t i = 0; i < n; ++i) {
              const uint64_t bits =
                  static_cast<uint64_t>(s[2 * i]) | (static_cast<uint64_t>(s[2 * i + 1]) << 32);
              p[off + i] = static_cast<IntType>(static_cast<uint64_t>(lo) + bits % range);
            }
          });
    }
    return absl::OkStatus();
  }

 private:
  random::GuardedPhilox generator_;
};

}  // namespace

void RegisterRandomKernels(KernelRegistry& r) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16};
  r.Add(KernelDef("RandomUniform").Device(kDeviceCpu).TypeConstraint("dtype", types),
        MakeKernel<PhiloxRandomOp<Dist::kUniform>>());
  r.Add(KernelDef("RandomStandardNormal").Device(kDeviceCpu).TypeConstraint("dtype", types),
        MakeKernel<PhiloxRandomOp<Dist::kNormal>>());
  r.Add(KernelDef("TruncatedNormal").Device(kDeviceCpu).TypeConstraint("dtype", types),
        MakeKernel<PhiloxRandomOp<Dist::kTruncatedNormal>>());
  r.Add(KernelDef("RandomUniformInt").Device(kDeviceCpu).TypeConstraint<int32_t>("Tout"),
        MakeKernel<RandomUniformIntOp<int32_t>>());
  r.Add(KernelDef("RandomUniformInt").Device(kDeviceCpu).TypeConstraint<int64_t>("Tout"),
        MakeKernel<RandomUniformIntOp<int64_t>>());
}

}  // namespace graphrun
