// The vector instruction set generated CPU kernels are compiled for, probed once from the CPU.
//
// Guarantees: detect_isa() names an ISA this process can execute: the CPU reports every feature
// the kernel flags enable (compile_flags() in cpp_compiler.h) and the OS saves the register state
// (XCR0), so a kernel built for it cannot die of SIGILL. The ISA name is part of the code cache key.
// Why not -march=native: the cache key must say exactly which instructions an artifact uses.
#pragma once

#include <cstdint>

namespace ember::runtime {

enum class Isa : uint8_t { Scalar, Avx2, Avx512 };

// The CPU and OS facts the decision rests on (exposed so the rule can be tested on any machine).
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool os_saves_ymm = false;  // XCR0 bits 1, 2 (SSE and AVX state)
  bool os_saves_zmm = false;  // XCR0 bits 5, 6, 7 (opmask, upper ZMM halves, ZMM16-31)
};

CpuFeatures probe_cpu_features();
// AVX-512 needs F, BW, DQ, VL and the AVX2 set (kernels use FMA and F16C at both levels) plus ZMM
// state; AVX2 needs AVX2, FMA, F16C plus YMM state; anything less is Scalar.
Isa isa_for(const CpuFeatures& features);
Isa detect_isa();  // isa_for(probe_cpu_features()), probed once
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"
// Inverse of isa_name; throws std::invalid_argument naming the unknown text.
Isa parse_isa(const char* name);

}  // namespace ember::runtime
