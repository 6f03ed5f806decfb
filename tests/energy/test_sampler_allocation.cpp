// The sampler loop never allocates: operator new is counted on the sampler's thread while windows
// open and close and the trace fills. (Its own executable: it replaces the global operator new.)
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>

#include <gtest/gtest.h>

#include "qjoule/energy/energy_meter.h"
#include "scripted_sensors.h"

namespace {

std::atomic<bool> g_watching{false};
std::atomic<std::thread::id> g_watched{};
std::atomic<long> g_allocations{0};

void* counted_allocation(std::size_t size) {
  if (g_watching.load(std::memory_order_relaxed) && std::this_thread::get_id() == g_watched.load()) {
    g_allocations.fetch_add(1);
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return counted_allocation(size); }
void* operator new[](std::size_t size) { return counted_allocation(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;

TEST(EnergySamplerAllocation, TheLoopNeverAllocates) {
  auto counter = std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 10.0);
  auto power = std::make_unique<test::ScriptedSensor>("nvml:gpu0", true, true, 100.0);
  test::ScriptedSensor* first = counter.get();
  SensorDiscovery found;
  found.sensors.push_back(std::move(counter));
  found.sensors.push_back(std::move(power));
  MeterOptions options;
  options.period = 1ms;
  options.trace_capacity = 1 << 12;
  EnergyMeter meter(std::move(found), options);
  meter.start();  // the first tick has happened: the sampler thread is known
  g_watched = first->first_reader;
  ASSERT_NE(g_watched.load(), std::this_thread::get_id());
  g_watching = true;
  for (int i = 0; i < 20; ++i) {
    Window w = meter.begin_window("w");
    std::this_thread::sleep_for(5ms);
    meter.end_window(w);
  }
  std::this_thread::sleep_for(20ms);
  g_watching = false;
  meter.stop();
  EXPECT_EQ(g_allocations.load(), 0) << "the sampler thread allocated";
  EXPECT_GT(first->reads(), 20);
}

}  // namespace
}  // namespace qjoule::energy
