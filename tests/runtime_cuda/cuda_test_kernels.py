"""Hand-written Triton kernels (module text, as the code generator produces it) and their
signatures, for the cubin cache and launcher tests. Each entry: (source, name, signature,
constexprs)."""

_HEADER = "import triton\nimport triton.language as tl\n\n\n"

ADD = (_HEADER + '''@triton.jit
def ember_test_add(x_ptr, y_ptr, out_ptr, n, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask) + tl.load(y_ptr + offsets, mask), mask)
''', "ember_test_add",
       [("x_ptr", "*fp32"), ("y_ptr", "*fp32"), ("out_ptr", "*fp32"), ("n", "i32"), ("XBLOCK", "constexpr")],
       [("XBLOCK", 128)])

# out = x * alpha + y in bf16 storage, alpha a bf16 scalar (2 bytes in the kernel's parameters).
AXPY_BF16 = (_HEADER + '''@triton.jit
def ember_test_axpy_bf16(x_ptr, y_ptr, out_ptr, alpha, n, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x * alpha.to(tl.float32) + y).to(tl.bfloat16), mask)
''', "ember_test_axpy_bf16",
             [("x_ptr", "*bf16"), ("y_ptr", "*bf16"), ("out_ptr", "*bf16"), ("alpha", "bf16"), ("n", "i32"),
              ("XBLOCK", "constexpr")],
             [("XBLOCK", 256)])

# Every scalar type the launcher packs, and one argument specialized to the constexpr 1 (which
# Triton drops from the launched parameters like a declared constexpr): the kernel writes each
# scalar, as float64, to out[0..7] (out[7] = h + one).
SCALARS = (_HEADER + '''@triton.jit
def ember_test_scalars(out_ptr, a, b, c, d, e, f, g, one, h, XBLOCK: tl.constexpr):
    tl.store(out_ptr + 0, a.to(tl.float64))
    tl.store(out_ptr + 1, b.to(tl.float64))
    tl.store(out_ptr + 2, c.to(tl.float64))
    tl.store(out_ptr + 3, d.to(tl.float64))
    tl.store(out_ptr + 4, e.to(tl.float64))
    tl.store(out_ptr + 5, f.to(tl.float64))
    tl.store(out_ptr + 6, g)
    tl.store(out_ptr + 7, (h + one).to(tl.float64))
''', "ember_test_scalars",
           [("out_ptr", "*fp64"), ("a", "fp32"), ("b", "fp16"), ("c", "bf16"), ("d", "i1"), ("e", "i32"),
            ("f", "i64"), ("g", "fp64"), ("one", "constexpr"), ("h", "i8"), ("XBLOCK", "constexpr")],
           [("one", 1), ("XBLOCK", 32)])

# A matmul whose pipelined tiles need more than 48 KiB of dynamic shared memory (3 stages of
# 128x64 + 64x128 fp16 tiles): the launcher must opt in. Sizes are multiples of the blocks.
MATMUL = (_HEADER + '''@triton.jit
def ember_test_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
''', "ember_test_matmul",
          [("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp32"), ("M", "i32"), ("N", "i32"), ("K", "i32"),
           ("BM", "constexpr"), ("BN", "constexpr"), ("BK", "constexpr")],
          [("BM", 128), ("BN", 128), ("BK", 64)])
