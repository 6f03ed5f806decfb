#include "energy/cpu_utilisation.h"

#include <sstream>
#include <string_view>

#include "energy/text_file.h"

namespace qjoule::energy {

std::optional<CpuTimes> read_cpu_times(const std::string& proc_stat) {
  const TextFile file = read_text_file(proc_stat);
  if (!file.ok) return std::nullopt;
  std::string_view text = file.text;
  if (text.substr(0, 4) != "cpu ") return std::nullopt;
  std::istringstream line(std::string(text.substr(4, text.find('\n') - 4)));
  std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(line >> user >> nice >> system >> idle)) return std::nullopt;
  line >> iowait >> irq >> softirq >> steal;  // absent on very old kernels: stay 0
  CpuTimes times;
  times.busy = user + nice + system + irq + softirq + steal;
  times.total = times.busy + idle + iowait;
  return times;
}

std::optional<double> cpu_utilisation(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return std::nullopt;
  return static_cast<double>(after.busy - before.busy) / static_cast<double>(after.total - before.total);
}

}  // namespace qjoule::energy
