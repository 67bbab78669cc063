// Timing Triton kernels on the device for the autotuner (runtime/autotune.h): launches between
// CUDA events on the caller's stream (torch's current one), with the buffers a kernel updates in
// place saved first and restored after each candidate, so that the call being tuned still
// computes its result from the inputs it was given.
//
// Needs: the Driver; a thread where the device's context is current or none is (as Kernel).
// Guarantees: time() runs kWarmup launches, then kRepeats, each between two events, and returns the
// median elapsed milliseconds; a launch that fails (out of resources, shared memory over the
// device's limit) makes it return nullopt with the driver's message; everything is queued on the
// stream (a trial never runs beside the work before it) and the host waits only for the trials'
// own events. The destructor waits for the stream's trial work and frees the saved copies.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/autotune.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/kernel.h"

namespace ember::runtime::cuda {

// A device range a kernel both loads and stores.
struct InPlaceRegion {
  CUdeviceptr pointer = 0;
  size_t bytes = 0;
};

class Trials {
 public:
  static constexpr int kWarmup = 3;
  static constexpr int kRepeats = 10;

  Trials(int device, CUstream stream) : device_(device), stream_(stream) {}
  ~Trials();
  Trials(const Trials&) = delete;
  Trials& operator=(const Trials&) = delete;

  // Copies each region aside (device memory of the driver's, freed by the destructor).
  bool save(const std::vector<InPlaceRegion>& regions, std::string* error);
  // Copies the saved bytes back, on the stream.
  bool restore(std::string* error);
  // Queues `work` (launches on the stream; false with `*why` set when one fails) kWarmup times,
  // then kRepeats times each between two events; the median elapsed milliseconds.
  using Work = std::function<bool(std::string* why)>;
  std::optional<double> time(const Work& work, std::string* why);
  std::optional<double> time(const Kernel& kernel, std::pair<uint32_t, uint32_t> grid, const ArgValue* args,
                             std::string* why);

 private:
  bool ready(std::string* error);  // the driver, a current context and the events
  int device_;
  CUstream stream_;
  const Driver* driver_ = nullptr;
  std::vector<CUevent> events_;  // kRepeats starts, then kRepeats ends
  std::vector<std::pair<InPlaceRegion, CUdeviceptr>> saved_;
};

// A config's kernel, compiled if need be; null with `*why` set when it cannot be had.
using KernelFor = std::function<std::shared_ptr<const Kernel>(const codegen::TritonConfig& config, std::string* why)>;
// A config's programs along axes 0 and 1.
using GridFor = std::function<std::pair<uint32_t, uint32_t>(const codegen::TritonConfig& config)>;

// A ConfigTimer over `trials`: each config's kernel (kernel_for) timed with `args` over its grid,
// then the saved in-place regions restored (throws std::runtime_error when a copy fails).
ConfigTimer device_timer(Trials& trials, const KernelFor& kernel_for, const GridFor& grid, const ArgValue* args);

// Chooses among `configs` (runtime/autotune.h, tune_configs), each timed on `stream` with `args`,
// the `in_place` regions saved first and restored after every config, so the caller's next launch
// sees the inputs it was given. Throws std::runtime_error when no config runs or a copy fails.
TuneResult tune_on_device(const std::vector<codegen::TritonConfig>& configs, const KernelFor& kernel_for, int device,
                          CUstream stream, const GridFor& grid, const ArgValue* args,
                          const std::vector<InPlaceRegion>& in_place, bool coordinate_descent);

// Whether `stream` is capturing a CUDA graph (or the driver cannot say): timing, which waits for
// events on the host, is illegal then, so tuning waits for an uncaptured call.
bool stream_capturing(CUstream stream);

// The device's name and compute capability ("NVIDIA H200 sm_90"), part of a tuning choice's key.
std::optional<std::string> describe_device(int device, std::string* error);

}  // namespace ember::runtime::cuda
