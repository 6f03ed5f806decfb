// Reading RunConfig fields from JSON with errors placed in their document (a sweep file's "defaults",
// a run record's flat config keys): shared by run_config.cpp, sweep.cpp and run_record.cpp.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "bench/json_fields.h"
#include "qjoule/bench/run_config.h"

namespace qjoule::bench::detail {

// Sets config's field `key` (one of kRunConfigKeys) from `value`; `place` is the value's place.
void read_run_config_field(RunConfig& config, std::string_view key, const nlohmann::json& value,
                           const JsonPlace& place);

// An object with any of kRunConfigKeys; missing keys keep RunConfig's defaults, others fail.
RunConfig read_run_config(const nlohmann::json& object, const JsonPlace& place);

}  // namespace qjoule::bench::detail
