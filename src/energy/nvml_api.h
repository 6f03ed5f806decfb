// The small part of NVML's C ABI that qjoule uses, written from NVIDIA's documented API (nvml.h,
// "NVML API Reference"), so that no NVIDIA header or library is needed at build time.
#pragma once

#include <cstdint>

namespace qjoule::energy::nvml {

using Return = int;                    // nvmlReturn_t (a C enum)
using Device = struct nvmlDevice_st*;  // nvmlDevice_t (opaque handle)

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

// nvmlValueType_t
inline constexpr int kValueDouble = 0;
inline constexpr int kValueUnsignedInt = 1;
inline constexpr int kValueUnsignedLong = 2;
inline constexpr int kValueUnsignedLongLong = 3;
inline constexpr int kValueSignedLongLong = 4;
inline constexpr int kValueSignedInt = 5;
inline constexpr int kValueUnsignedShort = 6;

union Value {  // nvmlValue_t
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId;
  unsigned int scopeId;  // for power fields: 0 = GPU, 1 = module
  long long timestamp;   // CPU time of the value, microseconds since 1970
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  Return nvmlReturn;
  Value value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t layout");

inline constexpr unsigned kFieldPowerAverage = 185;  // NVML_FI_DEV_POWER_AVERAGE (mW, 1-s average)
inline constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT (mW)

// nvmlDeviceArchitecture_t
inline constexpr unsigned kArchVolta = 5;
inline constexpr unsigned kArchAmpere = 7;

using InitFn = Return (*)();                         // nvmlInit_v2 / nvmlInit
using ShutdownFn = Return (*)();                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);
using DeviceGetUUIDFn = Return (*)(Device, char*, unsigned int);  // "GPU-8-4-4-4-12 hex"
using DeviceGetArchitectureFn = Return (*)(Device, unsigned int*);
using DeviceGetTotalEnergyConsumptionFn = Return (*)(Device, unsigned long long*);  // mJ
using DeviceGetPowerUsageFn = Return (*)(Device, unsigned int*);                    // mW
using DeviceGetFieldValuesFn = Return (*)(Device, int, FieldValue*);
using SystemGetDriverVersionFn = Return (*)(char*, unsigned int);
using DeviceGetHandleByPciBusIdFn = Return (*)(const char*, Device*);  // "domain:bus:device.function"
using DeviceGetIndexFn = Return (*)(Device, unsigned int*);
using DeviceGetHandleByUUIDFn = Return (*)(const char*, Device*);  // "GPU-..." or "MIG-..."
using DeviceIsMigDeviceHandleFn = Return (*)(Device, unsigned int*);
using DeviceGetDeviceHandleFromMigDeviceHandleFn = Return (*)(Device, Device*);

// The operating state of a GPU (read at the start and end of each energy window).
inline constexpr int kClockSm = 1;                                      // nvmlClockType_t NVML_CLOCK_SM
inline constexpr int kClockMem = 2;                                     // NVML_CLOCK_MEM
inline constexpr int kTemperatureGpu = 0;                               // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
using DeviceGetClockInfoFn = Return (*)(Device, int, unsigned int*);    // MHz
using DeviceGetTemperatureFn = Return (*)(Device, int, unsigned int*);  // °C
using DeviceGetEnforcedPowerLimitFn = Return (*)(Device, unsigned int*);               // mW
using DeviceGetPersistenceModeFn = Return (*)(Device, int*);                           // nvmlEnableState_t
using DeviceGetCurrentClocksEventReasonsFn = Return (*)(Device, unsigned long long*);  // bitmask

// nvmlClocksEventReason* bits (called ThrottleReason* before CUDA 12.2), with their names.
struct ClocksEventReason {
  unsigned long long bit;
  const char* name;
};
inline constexpr ClocksEventReason kClocksEventReasons[] = {
    {0x1ULL, "gpu_idle"},
    {0x2ULL, "applications_clocks_setting"},
    {0x4ULL, "sw_power_cap"},
    {0x8ULL, "hw_slowdown"},
    {0x10ULL, "sync_boost"},
    {0x20ULL, "sw_thermal_slowdown"},
    {0x40ULL, "hw_thermal_slowdown"},
    {0x80ULL, "hw_power_brake_slowdown"},
    {0x100ULL, "display_clock_setting"},
};

}  // namespace qjoule::energy::nvml
