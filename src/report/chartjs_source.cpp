#include "qjoule/report/chartjs_source.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "qjoule/error.h"

namespace qjoule::report {

std::filesystem::path chartjs_path() {
  const char* overridden = std::getenv(kChartJsEnvVar);
  return overridden != nullptr && *overridden != '\0' ? std::filesystem::path(overridden)
                                                      : std::filesystem::path(kDebianChartJsPath);
}

std::string load_chartjs(const std::filesystem::path& path) {
  std::error_code ec;
  std::ifstream in;
  if (std::filesystem::is_regular_file(path, ec)) in.open(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty())
    fail("Chart.js not found at '{}': install Debian's libjs-chart.js (or set {})", path.string(), kChartJsEnvVar);
  return text.str();
}

}  // namespace qjoule::report
