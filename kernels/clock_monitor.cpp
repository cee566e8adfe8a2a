#include "clock_monitor.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

namespace trainsim::gpu {

namespace {

// The few NVML entry points used, declared from NVML's C API (nvml.h is not part of every CUDA
// toolkit install): every call returns 0 (NVML_SUCCESS) on success.
using NvmlDevice = struct NvmlDeviceOpaque*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using HandleByPciFn = int (*)(const char*, NvmlDevice*);
using ClockFn = int (*)(NvmlDevice, int, unsigned int*);
using UintFn = int (*)(NvmlDevice, unsigned int*);
using ReasonsFn = int (*)(NvmlDevice, unsigned long long*);
using UuidFn = int (*)(NvmlDevice, char*, unsigned int);
// nvmlFieldValue_t and nvmlValue_t as nvml.h lays them out.
union NvmlValue {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
};
struct NvmlFieldValue {
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp_us;
  long long latency_us;
  int value_type;  // nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 int
  int result;      // nvmlReturn_t of this field
  NvmlValue value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t is 40 bytes: NVML writes that much per field");
using FieldValuesFn = int (*)(NvmlDevice, int, NvmlFieldValue*);
constexpr unsigned int kFieldPowerInstant = 186;     // NVML_FI_DEV_POWER_INSTANT, mW
constexpr int kClockSm = 1;                           // NVML_CLOCK_SM
constexpr unsigned long long kReasonSwPowerCap = 0x4;  // nvmlClocksEventReasonSwPowerCap

}  // namespace

double wall_clock_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct ClockMonitor::Impl {
  void* lib = nullptr;
  bool initialized = false;
  std::string why;
  NvmlDevice dev = nullptr;
  ClockFn clock = nullptr;
  UintFn power = nullptr, limit = nullptr;
  ReasonsFn reasons = nullptr;
  UuidFn uuid = nullptr;
  FieldValuesFn field_values = nullptr;
  bool instant = false;  // the driver reports the instantaneous power (checked once at open)
  ShutdownFn shutdown = nullptr;
  double interval_s = 0.02;
  std::atomic<bool> running{false};
  std::thread thread;
  std::vector<ClockReading> readings;

  template <class F>
  F symbol(const char* name) {
    return reinterpret_cast<F>(dlsym(lib, name));
  }
  bool open(int cuda_device) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fail("libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver here)");
    const auto init = symbol<InitFn>("nvmlInit_v2");
    shutdown = symbol<ShutdownFn>("nvmlShutdown");
    auto by_pci = symbol<HandleByPciFn>("nvmlDeviceGetHandleByPciBusId_v2");
    clock = symbol<ClockFn>("nvmlDeviceGetClockInfo");
    power = symbol<UintFn>("nvmlDeviceGetPowerUsage");
    limit = symbol<UintFn>("nvmlDeviceGetEnforcedPowerLimit");
    // Renamed in NVML 12.2; the older name stays as an alias in newer drivers.
    reasons = symbol<ReasonsFn>("nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) reasons = symbol<ReasonsFn>("nvmlDeviceGetCurrentClocksThrottleReasons");
    uuid = symbol<UuidFn>("nvmlDeviceGetUUID");
    field_values = symbol<FieldValuesFn>("nvmlDeviceGetFieldValues");
    if (!init || !shutdown || !by_pci || !clock || !power) return fail("libnvidia-ml lacks the NVML calls needed");
    if (init() != 0) return fail("nvmlInit failed");
    initialized = true;
    // CUDA and NVML may number the GPUs differently: the PCI bus id names the same one in both.
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) return fail("CUDA device has no PCI bus id");
    if (by_pci(bus, &dev) != 0) return fail(std::string("NVML does not know the GPU at ") + bus);
    instant = !std::isnan(instant_power_w());
    return true;
  }
  // NaN where the driver does not give it (NVML before 12.x, or a field it does not support).
  double instant_power_w() const {
    const double none = std::numeric_limits<double>::quiet_NaN();
    if (!field_values) return none;
    NvmlFieldValue f{};
    f.field_id = kFieldPowerInstant;
    if (field_values(dev, 1, &f) != 0 || f.result != 0) return none;
    switch (f.value_type) {
      case 0: return f.value.d * 1e-3;
      case 1: return f.value.ui * 1e-3;
      case 2: return static_cast<double>(f.value.ul) * 1e-3;
      case 3: return static_cast<double>(f.value.ull) * 1e-3;
      case 4: return static_cast<double>(f.value.sll) * 1e-3;
      case 5: return f.value.si * 1e-3;
      default: return none;
    }
  }
  bool fail(std::string reason) {
    why = std::move(reason);
    dev = nullptr;
    return false;
  }
  ClockReading read() const {
    ClockReading r;
    r.wall_s = wall_clock_s();
    unsigned int mhz = 0, mw = 0;
    unsigned long long why_slow = 0;
    if (clock(dev, kClockSm, &mhz) == 0) r.sm_mhz = mhz;
    if (power(dev, &mw) == 0) r.power_w = mw * 1e-3;
    if (reasons && reasons(dev, &why_slow) == 0) r.power_capped = (why_slow & kReasonSwPowerCap) != 0;
    if (instant) r.power_instant_w = instant_power_w();
    return r;
  }
};

ClockMonitor::ClockMonitor(int cuda_device, double interval_s) : impl_(std::make_unique<Impl>()) {
  impl_->interval_s = interval_s;
  impl_->open(cuda_device);
}

ClockMonitor::~ClockMonitor() {
  stop();
  if (impl_->initialized) impl_->shutdown();
  if (impl_->lib) dlclose(impl_->lib);
}

bool ClockMonitor::available() const { return impl_->dev != nullptr; }
const std::string& ClockMonitor::unavailable_reason() const { return impl_->why; }

double ClockMonitor::power_limit_w() const {
  unsigned int mw = 0;
  return available() && impl_->limit && impl_->limit(impl_->dev, &mw) == 0 ? mw * 1e-3 : 0.0;
}

std::string ClockMonitor::uuid() const {
  char buf[96] = {};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
  return available() && impl_->uuid && impl_->uuid(impl_->dev, buf, sizeof buf) == 0 ? std::string(buf) : std::string();
}

bool ClockMonitor::reports_power_cap() const { return available() && impl_->reasons != nullptr; }

bool ClockMonitor::reports_instant_power() const { return available() && impl_->instant; }

void ClockMonitor::start() {
  stop();
  impl_->readings.clear();
  if (!available()) return;
  impl_->running = true;
  impl_->thread = std::thread([im = impl_.get()] {
    const auto step = std::chrono::duration<double>(im->interval_s);
    while (im->running.load(std::memory_order_relaxed)) {
      im->readings.push_back(im->read());
      std::this_thread::sleep_for(step);
    }
  });
}

std::vector<ClockReading> ClockMonitor::stop() {
  if (impl_->thread.joinable()) {
    impl_->running = false;
    impl_->thread.join();
  }
  return impl_->readings;
}

}  // namespace trainsim::gpu
