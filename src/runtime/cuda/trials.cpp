// Timing kernels between CUDA events for the autotuner (trials.h).
#include "runtime/cuda/trials.h"

#include <algorithm>
#include <stdexcept>

namespace ember::runtime::cuda {

namespace {

constexpr unsigned kEventDefault = 0;  // CU_EVENT_DEFAULT: timing on, blocking sync off

}  // namespace

bool Trials::ready(std::string* error) {
  if (driver_ != nullptr) return true;
  std::string why_not;
  const Driver* driver = Driver::get(&why_not);
  if (!driver) return *error = why_not, false;
  const char* failed_call = nullptr;
  CUresult status = 0;
  if (!make_context_current(*driver, device_, &failed_call, &status))
    return *error = std::string(failed_call) + ": " + driver->describe(status), false;
  for (int i = 0; i < 2 * kRepeats; ++i) {
    CUevent event = nullptr;
    if (CUresult s = driver->cuEventCreate(&event, kEventDefault)) {
      *error = "cuEventCreate: " + driver->describe(s);
      for (CUevent made : events_) driver->cuEventDestroy(made);
      events_.clear();
      return false;
    }
    events_.push_back(event);
  }
  driver_ = driver;
  return true;
}

bool Trials::save(const std::vector<InPlaceRegion>& regions, std::string* error) {
  if (regions.empty()) return true;
  if (!ready(error)) return false;
  for (const InPlaceRegion& region : regions) {
    CUdeviceptr copy = 0;
    if (CUresult s = driver_->cuMemAlloc(&copy, region.bytes))
      return *error = "cuMemAlloc(" + std::to_string(region.bytes) + "): " + driver_->describe(s), false;
    saved_.emplace_back(region, copy);
    if (CUresult s = driver_->cuMemcpyDtoDAsync(copy, region.pointer, region.bytes, stream_))
      return *error = "cuMemcpyDtoDAsync: " + driver_->describe(s), false;
  }
  return true;
}

bool Trials::restore(std::string* error) {
  for (const auto& [region, copy] : saved_)
    if (CUresult s = driver_->cuMemcpyDtoDAsync(region.pointer, copy, region.bytes, stream_))
      return *error = "cuMemcpyDtoDAsync: " + driver_->describe(s), false;
  return true;
}

std::optional<double> Trials::time(const Kernel& kernel, std::pair<uint32_t, uint32_t> grid, const ArgValue* args,
                                   std::string* why) {
  return time([&](std::string* failed) { return kernel.launch(device_, stream_, grid.first, grid.second, 1, args, failed); },
              why);
}

std::optional<double> Trials::time(const Work& work, std::string* why) {
  if (!ready(why)) return std::nullopt;
  for (int i = 0; i < kWarmup; ++i)
    if (!work(why)) return std::nullopt;
  for (int i = 0; i < kRepeats; ++i) {
    if (CUresult s = driver_->cuEventRecord(events_[i], stream_))
      return *why = "cuEventRecord: " + driver_->describe(s), std::nullopt;
    if (!work(why)) return std::nullopt;
    if (CUresult s = driver_->cuEventRecord(events_[kRepeats + i], stream_))
      return *why = "cuEventRecord: " + driver_->describe(s), std::nullopt;
  }
  if (CUresult s = driver_->cuEventSynchronize(events_[2 * kRepeats - 1]))
    return *why = "cuEventSynchronize: " + driver_->describe(s), std::nullopt;
  std::vector<double> elapsed;
  for (int i = 0; i < kRepeats; ++i) {
    float ms = 0;
    if (CUresult s = driver_->cuEventElapsedTime(&ms, events_[i], events_[kRepeats + i]))
      return *why = "cuEventElapsedTime: " + driver_->describe(s), std::nullopt;
    elapsed.push_back(ms);
  }
  std::nth_element(elapsed.begin(), elapsed.begin() + kRepeats / 2, elapsed.end());
  return elapsed[kRepeats / 2];
}

Trials::~Trials() {
  if (driver_ == nullptr) return;
  // The restores are queued after the last timed event: wait for them before freeing the copies.
  CUevent done = events_.front();
  if (driver_->cuEventRecord(done, stream_) == 0) driver_->cuEventSynchronize(done);
  for (const auto& [region, copy] : saved_) driver_->cuMemFree(copy);
  for (CUevent event : events_) driver_->cuEventDestroy(event);
}

ConfigTimer device_timer(Trials& trials, const KernelFor& kernel_for, const GridFor& grid, const ArgValue* args) {
  return [&trials, kernel_for, grid, args](const codegen::TritonConfig& config, std::string* why) -> std::optional<double> {
    std::shared_ptr<const Kernel> kernel = kernel_for(config, why);
    if (!kernel) return std::nullopt;
    std::optional<double> ms = trials.time(*kernel, grid(config), args, why);
    std::string error;
    if (!trials.restore(&error)) throw std::runtime_error("restoring in-place buffers: " + error);
    return ms;
  };
}

TuneResult tune_on_device(const std::vector<codegen::TritonConfig>& configs, const KernelFor& kernel_for, int device,
                          CUstream stream, const GridFor& grid, const ArgValue* args,
                          const std::vector<InPlaceRegion>& in_place, bool coordinate_descent) {
  Trials trials(device, stream);
  std::string error;
  if (!trials.save(in_place, &error)) throw std::runtime_error("saving in-place buffers: " + error);
  return tune_configs(configs, device_timer(trials, kernel_for, grid, args), coordinate_descent);
}

bool stream_capturing(CUstream stream) {
  const Driver* driver = Driver::get(nullptr);
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  return !driver || driver->cuStreamIsCapturing(stream, &status) != 0 || status != 0;
}

std::optional<std::string> describe_device(int device, std::string* error) {
  const Driver* driver = Driver::get(error);
  if (!driver) return std::nullopt;
  constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
  CUdevice handle;
  char name[256] = {};
  int major = 0, minor = 0;
  CUresult s = driver->cuDeviceGet(&handle, device);
  if (!s) s = driver->cuDeviceGetName(name, sizeof name - 1, handle);
  if (!s) s = driver->cuDeviceGetAttribute(&major, kMajor, handle);
  if (!s) s = driver->cuDeviceGetAttribute(&minor, kMinor, handle);
  if (s) return *error = "describing cuda:" + std::to_string(device) + ": " + driver->describe(s), std::nullopt;
  return std::string(name) + " sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace ember::runtime::cuda
