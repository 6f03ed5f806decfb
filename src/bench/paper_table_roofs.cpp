#include "bench/paper_table_roofs.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "qjoule/limits/host_capacity.h"
#include "qjoule/limits/roofline.h"

namespace qjoule::bench {

// "47%" of the roof, or "—".
std::string roof_cell(const std::optional<double>& fraction) {
  return fraction ? fmt::format("{:.0f}%", *fraction * 100.0) : std::string(kMissing);
}

// The decode's beside fraction where the host's memory read more than limits::kReadBesideTolerance off the limits'.
std::optional<double> decode_beside_apart(const RunRecord& r) {
  const auto beside = decode_roof_fraction_beside(r);
  if (!beside || !r.decode_roof_fraction || !(*r.decode_roof_fraction > 0.0)) return std::nullopt;
  if (std::abs(*r.decode_roof_fraction / *beside - 1.0) <= limits::kReadBesideTolerance) return std::nullopt;
  return beside;
}

std::string decode_roof_cell(const RunRecord& r) {
  const auto beside = decode_beside_apart(r);
  return roof_cell(r.decode_roof_fraction) + (beside ? fmt::format(" ({:.0f}%)", *beside * 100.0) : "");
}

// Flags a phase below the warning fraction of its roof: on qjoule's kernel, or on the host where it was
// busy around the run. Not in proportion to the share it delivered: threads that meet at a barrier run
// at the pace of the one whose core is shared (the SST-2 model's int8 batches fell to a fifth of their
// quiet speed beside one spinning process, with the host at 46%), so no share tells a slow kernel from a
// busy host.
void warn_below_roof(PaperTable& table, const RunRecord& r, const char* phase, const std::optional<double>& fraction,
                     const std::string& bound) {
  if (!fraction || *fraction >= limits::kRoofWarningFraction) return;
  const std::string head =
      fmt::format("{}: {} at {:.0f}% of the machine's limit ({})", r.run_name, phase, *fraction * 100.0, bound);
  const auto beside = std::string_view(phase) == "decode" ? decode_beside_apart(r) : std::nullopt;
  if (beside && *beside >= limits::kRoofWarningFraction) {
    table.roof_warnings.push_back(fmt::format(
        "{}, but at {:.0f}% of the memory read measured beside the run: the host's memory ran slower than when the "
        "limits were measured (the record's notes)",
        head, *beside * 100.0));
    return;
  }
  const std::string host = busy_host(r);
  table.roof_warnings.push_back(
      host.empty()
          ? head + ": this figure is limited by qjoule's kernel, not by the hardware or the format"
          : head + ", on a busy host: " + host + "; re-run on a quiet machine before reading it as the kernel's");
}

bool any_roof(const std::vector<RunRecord>& records) {
  return std::any_of(records.begin(), records.end(), [](const RunRecord& r) {
    return r.status == "ok" && (r.roof_fraction || r.decode_roof_fraction);
  });
}

const char* const kRoofLegend =
    "% roof: the phase's achieved rate over the limit measured on the run's device (environment.machine_limits, "
    "`qjoule limits`): the lower of its GEMMs' compute peak (with attention's FP32 work at the FP32 peak beside "
    "other types) and intensity × memory bandwidth (CPU: read with the run's threads; GPU: device copy); decode: "
    "bytes read per token × tok/s over that bandwidth.";

const char* const kDecodeBesideLegend =
    "decode % roof (in parentheses): over the memory read measured right before and after the run, where the host's "
    "memory ran more than 15% off the limits' read (environment.host_capacity).";

}  // namespace qjoule::bench
