// Escaping for the report page: HTML text and attributes, JSON and scripts inside <script>.
#include <string>

#include <gtest/gtest.h>

#include "qjoule/report/html_text.h"

namespace qjoule::report {
namespace {

TEST(ReportHtmlText, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(html_escape("plain — text"), "plain — text");
  EXPECT_EQ(html_escape(""), "");
}

TEST(ReportHtmlText, JsonCannotCloseItsScriptElementAndStillParses) {
  const nlohmann::json value = {{"reason", "</script><script>alert(1)</script>"}, {"c", "<!-- x -->"}};
  const std::string text = json_for_script_element(value);
  EXPECT_EQ(text.find("</"), std::string::npos) << text;
  EXPECT_EQ(text.find("<!--"), std::string::npos) << text;
  EXPECT_NE(text.find("<\\/script>"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(text), value);
}

TEST(ReportHtmlText, InvalidUtf8IsReplacedNotThrown) {
  const nlohmann::json value = {{"bad", std::string("a\xff"
                                                    "b")}};
  EXPECT_NO_THROW(json_for_script_element(value));
}

TEST(ReportHtmlText, InlineScriptsCannotEndTheirElementEarly) {
  EXPECT_EQ(script_for_inline_element("var s = '</SCRIPT>' + '</script >';"),
            "var s = '<\\/SCRIPT>' + '<\\/script >';");
  EXPECT_EQ(script_for_inline_element("a < b && c </ d"), "a < b && c </ d");
}

}  // namespace
}  // namespace qjoule::report
