"""nvcc for the project's .cu files (--config=cuda builds)."""

# sm_90 (H100, H200) machine code, and PTX that newer GPUs compile at load.
_NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-march=x86-64-v3",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
    "--expt-relaxed-constexpr",
])

def cuda_objects(name, srcs, hdrs = []):
    """Compiles each .cu in srcs to an object file with nvcc; `name` is a
    cc_library of them under --config=cuda, and empty otherwise (the default
    build needs no CUDA)."""
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = select({
                "//build_defs:cuda": "/usr/local/cuda/bin/nvcc %s -I. -I$(GENDIR) -I/usr/local/cuda/include -c $(location %s) -o $@" % (_NVCC_FLAGS, src),
                "//conditions:default": "echo 'built with --config=cuda only' > $@",
            }),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = select({"//build_defs:cuda": objs, "//conditions:default": []}),
        hdrs = hdrs,
        deps = select({"//build_defs:cuda": ["@cuda//:libraries"], "//conditions:default": []}),
    )
