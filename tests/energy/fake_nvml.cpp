// A fake libnvidia-ml for tests, loaded by qjoule through QJOULE_NVML_LIB. It exports the NVML
// functions qjoule uses (signatures from NVIDIA's nvml.h) and simulates GPUs drawing constant power.
// Behaviour, read from the environment at nvmlInit:
//   FAKE_NVML_GPUS=N                   number of GPUs (default 1)
//   FAKE_NVML_WATTS=100,200            power per GPU (default 100 W each)
//   FAKE_NVML_ENERGY_UPDATE_MS=20      the energy counter moves in steps this long (default 0:
//                                      continuous)
//   FAKE_NVML_ENERGY=unsupported       nvmlDeviceGetTotalEnergyConsumption -> NOT_SUPPORTED
//   FAKE_NVML_FIELDS=unsupported       field 186 -> NOT_SUPPORTED (inside nvmlFieldValue_t)
//   FAKE_NVML_ARCH=9                   nvmlDeviceGetArchitecture (default 9, Hopper)
//   FAKE_NVML_INIT_ERROR=9             nvmlInit returns this code
//   FAKE_NVML_THROTTLE=0x24            nvmlDeviceGetCurrentClocksEventReasons (default 0)
//   FAKE_NVML_TEMPERATURE=unsupported  nvmlDeviceGetTemperature -> NOT_SUPPORTED
// GPU i's state: SM clock 1980 - i MHz, memory clock 2619 MHz, power limit 700 W, persistence mode on,
// temperature 40 + i °C plus one degree per 100 ms since nvmlInit (so a window's end is warmer).
// GPU i sits at PCI address 0000:(0x10 + i):00.0 (nvmlDeviceGetHandleByPciBusId_v2, any domain width),
// has UUID GPU-fake-<i> and one MIG instance MIG-fake-<i> (nvmlDeviceGetHandleByUUID).
// Built twice: the second build (FAKE_NVML_OLD_DRIVER) lacks nvmlDeviceGetFieldValues,
// nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetArchitecture and the state functions, like an old
// driver.
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kUninitialized = 1;
constexpr int kNotFound = 6;
constexpr int kMaxGpus = 8;

struct FakeDevice {
  int index;
};

union Value {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  int nvmlReturn;
  Value value;
};

FakeDevice g_devices[kMaxGpus] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
[[maybe_unused]] FakeDevice g_mig_devices[kMaxGpus] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};  // one MIG per GPU
int g_inits = 0;
int g_gpus = 1;
double g_watts[kMaxGpus] = {100, 100, 100, 100, 100, 100, 100, 100};
double g_update_s = 0.0;
bool g_energy_supported = true;
bool g_fields_supported = true;
unsigned g_arch = 9;
double g_start_s = 0.0;
long g_field_calls = 0;
long g_power_usage_calls = 0;
long g_energy_calls = 0;
unsigned long long g_throttle = 0;
bool g_temperature_supported = true;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int index_of(void* device) {
  for (int i = 0; i < g_gpus; ++i) {
    if (device == &g_devices[i]) return i;
  }
  return -1;
}

}  // namespace

FAKE_EXPORT int nvmlInit_v2() {
  if (const char* error = env("FAKE_NVML_INIT_ERROR")) return std::atoi(error);
  if (g_inits++ > 0) return kSuccess;
  g_gpus = env("FAKE_NVML_GPUS") ? std::atoi(env("FAKE_NVML_GPUS")) : 1;
  if (g_gpus < 0) g_gpus = 0;
  if (g_gpus > kMaxGpus) g_gpus = kMaxGpus;
  if (const char* watts = env("FAKE_NVML_WATTS")) {
    std::string list = watts;
    double last = 100;
    for (int i = 0; i < kMaxGpus; ++i) {
      if (!list.empty()) {
        last = std::atof(list.c_str());
        const auto comma = list.find(',');
        list = comma == std::string::npos ? std::string() : list.substr(comma + 1);
      }
      g_watts[i] = last;
    }
  }
  g_update_s = env("FAKE_NVML_ENERGY_UPDATE_MS") ? std::atof(env("FAKE_NVML_ENERGY_UPDATE_MS")) / 1e3 : 0.0;
  g_energy_supported = !(env("FAKE_NVML_ENERGY") && std::strcmp(env("FAKE_NVML_ENERGY"), "unsupported") == 0);
  g_fields_supported = !(env("FAKE_NVML_FIELDS") && std::strcmp(env("FAKE_NVML_FIELDS"), "unsupported") == 0);
  g_arch = env("FAKE_NVML_ARCH") ? static_cast<unsigned>(std::atoi(env("FAKE_NVML_ARCH"))) : 9u;
  g_throttle = env("FAKE_NVML_THROTTLE") ? std::strtoull(env("FAKE_NVML_THROTTLE"), nullptr, 0) : 0;
  g_temperature_supported =
      !(env("FAKE_NVML_TEMPERATURE") && std::strcmp(env("FAKE_NVML_TEMPERATURE"), "unsupported") == 0);
  g_start_s = now_s();
  return kSuccess;
}

FAKE_EXPORT int nvmlShutdown() {
  if (g_inits <= 0) return kUninitialized;
  --g_inits;
  return kSuccess;
}

FAKE_EXPORT const char* nvmlErrorString(int code) {
  switch (code) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

FAKE_EXPORT int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_inits <= 0) return kUninitialized;
  *count = static_cast<unsigned>(g_gpus);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (g_inits <= 0) return kUninitialized;
  if (static_cast<int>(index) >= g_gpus || device == nullptr) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  const int i = index_of(device);
  if (i < 0 || name == nullptr) return kInvalidArgument;
  std::string text = "Fake NVIDIA H100 " + std::to_string(i);
  std::strncpy(name, text.c_str(), length);
  if (length > 0) name[length - 1] = '\0';
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  const int i = index_of(device);
  if (i < 0 || uuid == nullptr) return kInvalidArgument;
  std::strncpy(uuid, ("GPU-fake-" + std::to_string(i)).c_str(), length);
  if (length > 0) uuid[length - 1] = '\0';
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  const int i = index_of(device);
  if (i < 0 || milliwatts == nullptr) return kInvalidArgument;
  ++g_power_usage_calls;
  *milliwatts = static_cast<unsigned>(g_watts[i] * 1000.0);
  return kSuccess;
}

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (g_inits <= 0) return kUninitialized;
  if (bus_id == nullptr || device == nullptr) return kInvalidArgument;
  // "domain:bus:device.function": the bus is the two hex digits after the first colon.
  const char* colon = std::strchr(bus_id, ':');
  if (colon == nullptr) return kInvalidArgument;
  char* end = nullptr;
  const long bus = std::strtol(colon + 1, &end, 16);
  if (end == colon + 1 || *end != ':' || std::strcmp(end, ":00.0") != 0) return kNotFound;
  const long index = bus - 0x10;
  if (index < 0 || index >= g_gpus) return kNotFound;
  *device = &g_devices[index];
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (g_inits <= 0) return kUninitialized;
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  const bool mig = std::strncmp(uuid, "MIG-fake-", 9) == 0;
  if (!mig && std::strncmp(uuid, "GPU-fake-", 9) != 0) return kNotFound;
  char* end = nullptr;
  const long index = std::strtol(uuid + 9, &end, 10);
  if (end == uuid + 9 || *end != '\0' || index < 0 || index >= g_gpus) return kNotFound;
  *device = mig ? &g_mig_devices[index] : &g_devices[index];
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceIsMigDeviceHandle(void* device, unsigned int* is_mig) {
  if (is_mig == nullptr) return kInvalidArgument;
  for (int i = 0; i < g_gpus; ++i) {
    if (device == &g_mig_devices[i]) {
      *is_mig = 1;
      return kSuccess;
    }
  }
  if (index_of(device) < 0) return kInvalidArgument;
  *is_mig = 0;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetIndex(void* device, unsigned int* index) {
  const int i = index_of(device);
  if (i < 0 || index == nullptr) return kInvalidArgument;
  *index = static_cast<unsigned>(i);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetArchitecture(void* device, unsigned int* arch) {
  if (index_of(device) < 0 || arch == nullptr) return kInvalidArgument;
  *arch = g_arch;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* millijoules) {
  const int i = index_of(device);
  if (i < 0 || millijoules == nullptr) return kInvalidArgument;
  if (!g_energy_supported) return kNotSupported;
  ++g_energy_calls;
  double elapsed = now_s() - g_start_s;
  if (g_update_s > 0) elapsed = static_cast<double>(static_cast<long long>(elapsed / g_update_s)) * g_update_s;
  // Starts at a large value, as a real counter does after days of uptime.
  *millijoules = 5'000'000'000ULL + static_cast<unsigned long long>(g_watts[i] * elapsed * 1000.0);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* mhz) {
  const int i = index_of(device);
  if (i < 0 || mhz == nullptr) return kInvalidArgument;
  if (type == 1) {  // NVML_CLOCK_SM
    *mhz = static_cast<unsigned>(1980 - i);
  } else if (type == 2) {  // NVML_CLOCK_MEM
    *mhz = 2619;
  } else {
    return kNotSupported;
  }
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  const int i = index_of(device);
  if (i < 0 || celsius == nullptr || sensor != 0) return kInvalidArgument;
  if (!g_temperature_supported) return kNotSupported;
  const double warmer = (now_s() - g_start_s) * 10.0;
  *celsius = static_cast<unsigned>(40 + i + (warmer < 40 ? warmer : 40));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned int* milliwatts) {
  if (index_of(device) < 0 || milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = 700000;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetPersistenceMode(void* device, int* mode) {
  if (index_of(device) < 0 || mode == nullptr) return kInvalidArgument;
  *mode = 1;  // NVML_FEATURE_ENABLED
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  if (index_of(device) < 0 || reasons == nullptr) return kInvalidArgument;
  *reasons = g_throttle;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetFieldValues(void* device, int count, FieldValue* values) {
  const int i = index_of(device);
  if (i < 0 || values == nullptr || count <= 0) return kInvalidArgument;
  ++g_field_calls;
  for (int k = 0; k < count; ++k) {
    FieldValue& v = values[k];
    if (v.fieldId == 186 && g_fields_supported) {
      v.nvmlReturn = kSuccess;
      v.valueType = 1;  // NVML_VALUE_TYPE_UNSIGNED_INT
      v.value.uiVal = static_cast<unsigned>(g_watts[i] * 1000.0);
    } else {
      v.nvmlReturn = kNotSupported;
    }
  }
  return kSuccess;
}
#endif

// Test-only introspection.
FAKE_EXPORT int fake_nvml_active_inits() { return g_inits; }
FAKE_EXPORT long fake_nvml_field_calls() { return g_field_calls; }
FAKE_EXPORT long fake_nvml_power_usage_calls() { return g_power_usage_calls; }
FAKE_EXPORT long fake_nvml_energy_calls() { return g_energy_calls; }
