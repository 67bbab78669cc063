// The compiler of the calling thread's innermost region (see region.h).
#include "frontend/region.h"

namespace ember::frontend {

namespace {
thread_local FrameCompiler* t_compiler = nullptr;
}  // namespace

FrameCompiler* region_compiler() { return t_compiler; }

RegionCompilerScope::RegionCompilerScope(FrameCompiler* compiler) : saved_(t_compiler) { t_compiler = compiler; }

RegionCompilerScope::~RegionCompilerScope() { t_compiler = saved_; }

}  // namespace ember::frontend
