// CPU probing with cpuid (leaf 1: AVX, FMA, F16C, OSXSAVE; leaf 7: AVX2, AVX-512 subsets) and
// xgetbv (XCR0: which register state the OS saves on a context switch). A CPU feature without
// OS support faults like a missing one, so both must hold. Off x86-64 everything is Scalar.
#include "runtime/isa.h"

#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ember::runtime {

CpuFeatures probe_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  bool osxsave = ecx & (1u << 27);
  f.avx = ecx & (1u << 28);
  f.fma = ecx & (1u << 12);
  f.f16c = ecx & (1u << 29);
  if (osxsave) {
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    // xgetbv with ECX=0 reads XCR0; only legal when OSXSAVE is set.
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    f.os_saves_ymm = (xcr0_lo & 0x6u) == 0x6u;
    f.os_saves_zmm = f.os_saves_ymm && (xcr0_lo & 0xE0u) == 0xE0u;
  }
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    f.avx2 = ebx & (1u << 5);
    f.avx512f = ebx & (1u << 16);
    f.avx512dq = ebx & (1u << 17);
    f.avx512bw = ebx & (1u << 30);
    f.avx512vl = ebx & (1u << 31);
  }
#endif
  return f;
}

Isa isa_for(const CpuFeatures& f) {
  bool avx2_set = f.avx && f.avx2 && f.fma && f.f16c && f.os_saves_ymm;
  if (avx2_set && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.os_saves_zmm) return Isa::Avx512;
  if (avx2_set) return Isa::Avx2;
  return Isa::Scalar;
}

Isa detect_isa() {
  static const Isa isa = isa_for(probe_cpu_features());
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  throw std::logic_error("isa_name: invalid Isa value");
}

Isa parse_isa(const char* name) {
  std::string text = name ? name : "";
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (text == isa_name(isa)) return isa;
  }
  throw std::invalid_argument("unknown ISA '" + text + "'; expected scalar, avx2 or avx512");
}

}  // namespace ember::runtime
