// Text that goes into the HTML report: escaped for element content and attribute values, and JSON
// made safe to sit inside a <script> element.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qjoule::report {

// & < > " ' as character references: safe in element content and in quoted attribute values.
std::string html_escape(std::string_view text);

// json.dump() with "</" written "<\/" and "<!--" written "<\u0021--" (both the same JSON), so the
// text cannot end or confuse the <script> element that holds it. Invalid UTF-8 is replaced.
std::string json_for_script_element(const nlohmann::json& json);

// Script source (Chart.js) with every "</script" (any case) written "<\/script" so it cannot end the
// inline <script> element early.
std::string script_for_inline_element(std::string_view source);

}  // namespace qjoule::report
