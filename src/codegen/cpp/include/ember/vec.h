// Ember's SIMD vector header: the one header every generated CPU kernel includes.
//
// Needs: C++17 and, for the SIMD layers, the driver's flags: EMBER_ISA_AVX512 with -mavx512f
// -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c, or EMBER_ISA_AVX2 with -mavx2 -mfma -mf16c, or
// neither (portable scalar code). Compiled with -O3 -ffp-contract=off and never -ffast-math: the
// math relies on IEEE arithmetic and on fma happening only where it is written.
// Guarantees: namespace ember::vec with
//   VecF (kSize float lanes: 16 AVX-512, 8 AVX2 and scalar), MaskF, VecI (int32 lanes, one per VecF
//   lane: integer arithmetic, compares to MaskF, conversion to float), full and tail (n-lane)
//   loads/stores of float, bfloat16, float16 and bool bytes; float loads of the lanes of a MaskF; converting loads of integers and bools
//   (load_float, vec_convert.h); element-wise arithmetic, comparisons,
//   where, NaN-propagating maximum/minimum; math within 2 ulp of libm (vec_math.h); horizontal
//   reductions, Welford and double carries of long reductions (vec_reduce.h); float forms of every
//   function with the same bits; Philox uniforms, scalar and vector (philox.h).
// Why a header of our own: generated code needs a small, fixed vocabulary whose numerics we control
// and test (docs/vector-math.md), not a general SIMD library.
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/vec_half.h"

#if defined(EMBER_ISA_AVX512) && defined(EMBER_ISA_AVX2)
#error "ember/vec.h: define one of EMBER_ISA_AVX512 and EMBER_ISA_AVX2, not both"
#endif

#if defined(EMBER_ISA_AVX512)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || \
    !defined(__AVX512VL__) || !defined(__FMA__) || !defined(__F16C__)
#error "ember/vec.h: EMBER_ISA_AVX512 needs -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c"
#endif
#define EMBER_VEC_SIMD 1
#include "ember/vec_avx512.h"
#elif defined(EMBER_ISA_AVX2)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "ember/vec.h: EMBER_ISA_AVX2 needs -mavx2 -mfma -mf16c"
#endif
#define EMBER_VEC_SIMD 1
#include "ember/vec_avx2.h"
#else
#define EMBER_VEC_SIMD 0
#include "ember/vec_scalar.h"
#endif

#include "ember/vec_convert.h"
#include "ember/vec_math.h"
#include "ember/vec_reduce.h"
#include "ember/philox.h"
