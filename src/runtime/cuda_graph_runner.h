// CudaGraphRunner: mode="reduce-overhead" on CUDA. It wraps a CompiledGraph and replays the
// graph's launches (Triton kernels and extern calls such as cuBLAS matmuls) as one CUDA graph, so
// a call costs one cuGraphLaunch instead of one launch per kernel (docs/cuda-runtime.md, "CUDA
// graphs"; notes/triton_backend.md §5).
//
// Call 1 warms up: the CompiledGraph runs as usual (Triton modules load, cuBLAS creates its
// workspace, torch's allocator sees the sizes). Call 2 records: every input gets a slot, and the
// CompiledGraph runs once inside `torch.cuda.graph(g, pool=..., capture_error_mode="thread_local")`
// (torch's allocator then serves the arena, the outputs and every extern's result from the graph's
// private pool, and cuBLAS cooperates), then the graph is launched once. Later calls replay:
// the copied inputs are copied into their slots, the graph's exec (`raw_cuda_graph_exec()`) is
// launched from C++ with cuGraphLaunch on torch's current stream, and the outputs are returned.
//
// Inputs. An input whose address is the same on the recording call as on the call before it (a
// parameter, a buffer, an activation torch's allocator keeps placing at one address) is used in
// place: the graph reads it where it is. Every other input is copied into a graph-owned tensor with
// its sizes and strides (one copy_ per input per call). Each replay checks every input's sizes,
// strides and dtype, and the address of every in-place input; a difference re-records (the input
// whose address moved is then copied), at most kRerecordLimit times, after which the graph runs
// as a plain CompiledGraph for good.
//
// Outputs. The caller keeps what a call returns, so every call returns fresh tensors: clones of the
// graph's static outputs (one copy per output), never memory that the next replay overwrites. An
// output that is a graph input itself is returned as the caller's input, as eager returns it.
//
// Mutated inputs. A kernel or in-place extern that writes an input writes its slot; a copied
// mutated input is copied back to the caller's tensor after the launch. A graph where a mutated
// input shares memory with another input, or where an output shares memory with an input without
// being it, is not recorded (copies would break the aliasing): it runs plainly.
//
// Needs: the GIL on every call (the bookkeeping is Python objects); torch with CUDA. Guarantees:
// results equal the plain CompiledGraph's; a call that finds the runner busy (another thread, or a
// re-entry while recording) runs the plain CompiledGraph; a call on another stream than the
// previous replay's first waits for that stream (static buffers are shared between the two);
// anything that fails while recording (an extern that synchronizes, a capture error) makes the graph
// run plainly for good, with the reason kept for the logs (plain_reason()). Random extern calls are
// refused before (why_no_cuda_graph): torch advances a graph's RNG offsets in CUDAGraph.replay(),
// which a raw cuGraphLaunch skips, so a replay would repeat the same random numbers.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"
#include "pybridge/pyref.h"
#include "runtime/compiled_graph.h"
#include "runtime/graph_runner.h"

namespace ember::runtime {

// Why `program` does not run as a CUDA graph, "" when it may: a device other than CUDA, a single
// step (the bookkeeping costs more than the launch it saves: notes/triton_backend.md §5), a random
// extern call, or an in-place write to memory whose owner the program cannot tell (a buffer an
// extern returned may alias an input).
std::string why_no_cuda_graph(const loop_ir::Program& program);

class CudaGraphRunner : public GraphRunner {
 public:
  static constexpr int kRerecordLimit = 8;

  // `graph` runs a program why_no_cuda_graph accepts, on a CUDA device.
  explicit CudaGraphRunner(std::unique_ptr<CompiledGraph> graph);
  ~CudaGraphRunner() override;
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;
  bool run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                      std::vector<PyRef>* outputs) const override;

  // Why the graph now runs plainly ("" while it is graphed); for tests and logs.
  const std::string& plain_reason() const { return plain_reason_; }

 private:
  // What a call's input looks like; a replay needs the same.
  struct InputShape {
    void* data = nullptr;
    ir::DType dtype = ir::DType::Float32;
    std::vector<int64_t> sizes, strides;
    bool same_layout(const InputShape& other) const;
  };
  struct Slot {
    InputShape shape;  // at recording
    PyRef copy;        // the graph-owned tensor the input is copied into; null: used in place
    bool mutated = false;
  };
  enum class State : uint8_t { Warmup, Record, Replay, Plain };

  bool read_inputs(PyObject* const* inputs, pybridge::TensorReads& reads, std::vector<InputShape>* shapes) const;
  // Records; false with a Python error set only for errors that are the caller's (a failed
  // copy); a capture that fails leaves the runner Plain.
  bool record(PyObject* const* inputs, const std::vector<InputShape>& shapes, std::vector<PyRef>* outputs) const;
  bool replay(PyObject* const* inputs, std::vector<PyRef>* outputs) const;
  // Whether `shapes` can be replayed; false means re-record.
  bool replayable(const std::vector<InputShape>& shapes) const;
  bool give_up(const std::string& reason) const;  // go Plain; returns false when a Python error is pending
  void drop_recording() const;

  std::unique_ptr<CompiledGraph> graph_;
  std::vector<bool> mutated_inputs_;  // per graph input
  int device_index_ = 0;
  // Under the GIL:
  mutable State state_ = State::Warmup;
  mutable bool busy_ = false;
  mutable int rerecords_ = 0;
  mutable std::string plain_reason_;
  mutable std::vector<InputShape> last_shapes_;  // the previous call's
  mutable std::vector<Slot> slots_;
  mutable PyRef pool_;            // torch.cuda.graph_pool_handle(), one per runner
  mutable PyRef cuda_graph_;      // the torch.cuda.CUDAGraph, owner of the exec and of the pool's memory
  mutable void* exec_ = nullptr;  // its raw_cuda_graph_exec()
  mutable std::vector<PyRef> static_outputs_;
  mutable std::vector<int> output_is_input_;  // per output: the graph input it is, or -1
  mutable void* last_stream_ = nullptr;
  mutable bool replayed_ = false;  // last_stream_ is set
};

}  // namespace ember::runtime
