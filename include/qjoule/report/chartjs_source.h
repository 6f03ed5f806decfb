// Chart.js, inlined into every report so that the page opens offline and fetches nothing. qjoule
// does not vendor it: Debian's libjs-chart.js (3.9.1) provides it at run time.
#pragma once

#include <filesystem>
#include <string>

namespace qjoule::report {

inline constexpr const char* kDebianChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";
inline constexpr const char* kChartJsEnvVar = "QJOULE_CHARTJS";

// $QJOULE_CHARTJS when set and not empty, else Debian's path.
std::filesystem::path chartjs_path();

// The text of Chart.js at `path`. Missing, unreadable or empty fails "Chart.js not found at 'PATH':
// install Debian's libjs-chart.js (or set QJOULE_CHARTJS)".
std::string load_chartjs(const std::filesystem::path& path);

}  // namespace qjoule::report
