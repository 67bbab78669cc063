// Grouped (horizontal, multi-tensor) kernels: independent pointwise kernels with one body over
// different buffers, run as one kernel that walks a table of (pointers, element counts) -- an
// optimizer's per-parameter update over 76 tensors, `torch._foreach_*`, small independent
// epilogues (docs/loop-ir.md, "Groups"; docs/scheduler.md, "Grouped kernels").
//
// Semantics. A group names consecutive kernel steps (Program::groups). Its members read and write
// disjoint storage where one writes (no member reads or writes a root another member writes), so
// their points may run in any order and interleaved: running them one after another, as a program
// without the group does, gives the same values. A code generator that does not know groups may
// therefore ignore them; the C++ one runs every element of every member in one parallel region.
//
// The members' common body: each member is a pointwise kernel over one constant outer range
// [i0 < n], or none (one element) (one loop without ranges; no index values, index checks, masks or
// indirect indices), every load and store of which reads its buffer at flat element offset i0 + c
// (a stream) or c (a scalar: the same element at every point), c constant. In a member without an
// outer range (i0 is 0) each buffer is seen as the group's other members see it. Buffers are numbered by first access (the
// code generator's parameter order), and each buffer's accesses are made relative to the smallest
// offset of any of them (the member's `base`: where its pointer points). Two members have one body
// when the nodes, with those (buffer number, stream or scalar, relative offset) in place of buffer
// and index, are equal, as are the buffers' dtypes.
//
// Text form: the members print inside the group, where the group runs:
//   group @g0 {
//     kernel @k3 [i0 < 65536] { ... }
//     kernel @k4 [i0 < 256] { ... }
//   }
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

// One member seen through the common body.
struct GroupMember {
  int64_t extent = 0;                // n: the member's element count
  std::vector<BufferId> buffers;     // by first access: the body's parameter k is buffers[k]
  std::vector<int64_t> bases;        // per parameter: the element its pointer points at
  std::vector<bool> streams;         // per parameter: some access walks it with i0
  std::string signature;             // the body with parameters in place of buffers: equal for one body
};

// The member view of `kernel`, or nullopt with the reason in `why` (when not null). A member without
// an outer range (i0 is 0: any buffer may be seen as a stream or a scalar) sees parameter k as a
// stream when `streams[k]` (the group's other members' view), else by its size.
std::optional<GroupMember> group_member(const Program& program, const Kernel& kernel, std::string* why = nullptr,
                                        const std::vector<bool>* streams = nullptr);
// The streams of the group's first member with an outer range (nullopt: none): what its members
// without one take.
std::optional<std::vector<bool>> group_streams(const Program& program, const std::vector<int>& kernels);

// Why `kernels` (indices into program.kernels) cannot form one group ("" when they can): fewer than
// two, a kernel that is not a member (group_member), two bodies, or a member writing storage another
// member reads or writes.
std::string group_refusal(const Program& program, const std::vector<int>& kernels);

// The common body of a group's members as a kernel of its own over a symbolic extent `extent`
// (i0 < extent), each parameter k a buffer %b<k> of the member's dtype with unit stride (a stream
// reads %b<k>[i0 + offset], a scalar %b<k>[offset]): what a code generator emits once for all.
// `body_program` receives the buffers (Input k) and the symbol, whose range is [1, largest] (the largest
// piece a code generator runs through the body); `member_kernel` is any member.
Kernel group_body(const Program& program, const Kernel& member_kernel, const std::vector<bool>* streams,
                  const std::string& extent, Program& body_program,
                  int64_t largest = std::numeric_limits<int64_t>::max());

}  // namespace ember::loop_ir
