// Layer selection: glob matching, option parsing (bad syntax → one clear line), resolution order, and the
// typed decisions (each format parsed once, with the defaults); quant::Precision, a spec as written and parsed.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/error.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/quant/precision.h"

namespace {

using namespace qjoule::quant;

const std::string kQ = "distilbert.transformer.layer.0.attention.q_lin";
const std::string kFfn1 = "distilbert.transformer.layer.0.ffn.lin1";
const std::string kFfn5 = "distilbert.transformer.layer.5.ffn.lin2";
const std::string kClassifier = "classifier";
const std::string kPreClassifier = "pre_classifier";
const std::vector<std::string> kFormats = {"fp32", "bf16", "fp16", "int8", "w8", "int4", "nf4"};

LayerPolicyOptions options(std::string precision, std::string include = "", std::string exclude = "",
                           std::string layer_precision = "") {
  LayerPolicyOptions o;
  o.precision = std::move(precision);
  o.include = std::move(include);
  o.exclude = std::move(exclude);
  o.layer_precision = std::move(layer_precision);
  return o;
}

using qjoule::test::error_of;

TEST(GlobMatch, StarAndQuestionMark) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", kQ));
  EXPECT_TRUE(glob_match("*.q_lin", kQ));
  EXPECT_TRUE(glob_match("*.layer.?.*", kQ));
  EXPECT_FALSE(glob_match("*.layer.??.*", kQ));
  EXPECT_TRUE(glob_match("*ffn*", kFfn1));
  EXPECT_TRUE(glob_match("distilbert.*.lin1", kFfn1));
  EXPECT_FALSE(glob_match("*.lin1", kFfn5));
  EXPECT_FALSE(glob_match("q_lin", kQ)) << "the whole name must match";
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYY"));
  EXPECT_TRUE(glob_match("a**?", "ab"));
  EXPECT_FALSE(glob_match("?", ""));
}

TEST(ParseGlobList, SplitsTrimsAndRejectsBadItems) {
  EXPECT_EQ(parse_glob_list(" *.q_lin , *ffn* ", "--quant-include"), (std::vector<std::string>{"*.q_lin", "*ffn*"}));
  EXPECT_TRUE(parse_glob_list("", "--quant-include").empty());
  EXPECT_TRUE(parse_glob_list("  ", "--quant-include").empty());
  const std::string empty_item = error_of([] { parse_glob_list("a,,b", "--quant-exclude"); });
  EXPECT_NE(empty_item.find("--quant-exclude"), std::string::npos) << empty_item;
  EXPECT_NE(empty_item.find("empty item"), std::string::npos) << empty_item;
  EXPECT_NE(error_of([] { parse_glob_list("a,", "--quant-include"); }).find("empty item"), std::string::npos);
  const std::string bracket = error_of([] { parse_glob_list("layer.[0-3].*", "--quant-include"); });
  EXPECT_NE(bracket.find("'layer.[0-3].*'"), std::string::npos) << bracket;
  EXPECT_NE(error_of([] { parse_glob_list("a b", "--quant-include"); }).find("whitespace"), std::string::npos);
  for (const std::string& e : {empty_item, bracket}) EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
}

TEST(ParseLayerPrecision, RulesInOrderAndClearErrors) {
  const auto rules = parse_layer_precision("*.ffn.*=int4, *.attention.* = int8", kFormats);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].pattern, "*.ffn.*");
  EXPECT_EQ(rules[0].format, "int4");
  EXPECT_EQ(rules[1].pattern, "*.attention.*");
  EXPECT_EQ(rules[1].format, "int8");
  const std::string no_eq = error_of([] { parse_layer_precision("*.ffn.*", kFormats); });
  EXPECT_NE(no_eq.find("--layer-precision"), std::string::npos) << no_eq;
  EXPECT_NE(no_eq.find("PATTERN=FORMAT"), std::string::npos) << no_eq;
  // The first '=' ends the pattern; the format may hold more (int4:g=64, int8:sq=0.5).
  EXPECT_NE(error_of([] { parse_layer_precision("a=b=c", kFormats); }).find("unknown format 'b=c'"), std::string::npos);
  EXPECT_EQ(parse_layer_precision("*.ffn.*=int4:g=64:asym").front().format, "int4:g=64:asym");
  EXPECT_NE(error_of([] { parse_layer_precision("=int8", kFormats); }).find("empty pattern"), std::string::npos);
  EXPECT_NE(error_of([] { parse_layer_precision("*=", kFormats); }).find("empty format"), std::string::npos);
  const std::string unknown = error_of([] { parse_layer_precision("*=int3", kFormats); });
  EXPECT_NE(unknown.find("'int3'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("fp32, bf16, fp16, int8, w8, int4, nf4"), std::string::npos) << unknown;
  EXPECT_EQ(parse_layer_precision("*=int3").front().format, "int3") << "no validation without a format list";
}

TEST(LayerPolicy, DefaultSetIsBlockLinearsOnly) {
  const LayerPolicy policy = LayerPolicy::parse(options("int8"), {}, kFormats);
  EXPECT_EQ(policy.resolve(kQ, true).format, "int8");
  EXPECT_EQ(policy.resolve(kFfn5, true).format, "int8");
  const LayerDecision cls = policy.resolve(kClassifier, false);
  EXPECT_EQ(cls.format, "fp32");
  EXPECT_FALSE(cls.quantized());
  EXPECT_NE(cls.reason.find("not a transformer-block linear"), std::string::npos) << cls.reason;
  EXPECT_EQ(policy.resolve(kPreClassifier, false).format, "fp32");
  EXPECT_EQ(policy.resolve("distilbert.embeddings.word_embeddings", false).format, "fp32");
}

TEST(LayerPolicy, IncludeReplacesTheDefaultSetAndExcludeWins) {
  const LayerPolicy policy = LayerPolicy::parse(options("int8", "*.ffn.*,pre_classifier", "*.layer.5.*"), {}, kFormats);
  EXPECT_EQ(policy.resolve(kFfn1, true).format, "int8");
  EXPECT_EQ(policy.resolve(kPreClassifier, false).format, "int8") << "explicit include opts a head layer in";
  const LayerDecision q = policy.resolve(kQ, true);
  EXPECT_EQ(q.format, "fp32");
  EXPECT_NE(q.reason.find("--quant-include"), std::string::npos) << q.reason;
  const LayerDecision last = policy.resolve(kFfn5, true);
  EXPECT_EQ(last.format, "fp32");
  EXPECT_EQ(last.reason, "excluded by --quant-exclude '*.layer.5.*'");
}

TEST(LayerPolicy, FirstMatchingLayerPrecisionRuleWins) {
  const LayerPolicy policy = LayerPolicy::parse(
      options("int8", "", "", "*.layer.0.*=bf16,*.layer.5.*=bf16,*.ffn.*=int4,*.q_lin=fp32"), {}, kFormats);
  EXPECT_EQ(policy.resolve(kFfn1, true).format, "bf16") << "layer 0 rule comes before the ffn rule";
  EXPECT_EQ(policy.resolve(kFfn5, true).format, "bf16");
  EXPECT_EQ(policy.resolve("distilbert.transformer.layer.3.ffn.lin1", true).format, "int4");
  const LayerDecision q3 = policy.resolve("distilbert.transformer.layer.3.attention.q_lin", true);
  EXPECT_EQ(q3.format, "fp32");
  EXPECT_NE(q3.reason.find("'*.q_lin=fp32'"), std::string::npos) << q3.reason;
  const LayerDecision k3 = policy.resolve("distilbert.transformer.layer.3.attention.k_lin", true);
  EXPECT_EQ(k3.format, "int8");
  EXPECT_EQ(k3.reason, "block linear, --precision int8");
  EXPECT_EQ(policy.resolve(kClassifier, false).format, "fp32") << "rules do not widen the candidate set";
}

TEST(LayerPolicy, RejectsUnknownPrecision) {
  const std::string e = error_of([] { LayerPolicy::parse(options("int2"), {}, kFormats); });
  EXPECT_NE(e.find("--precision"), std::string::npos) << e;
  EXPECT_NE(e.find("'int2'"), std::string::npos) << e;
  EXPECT_NE(e.find("nf4"), std::string::npos) << e;
}

}  // namespace

namespace {

TEST(LayerPolicy, EveryDecisionCarriesItsFormatParsedOnceWithTheDefaults) {
  FormatSpec defaults;
  defaults.group_size = 64;
  defaults.nf4_double_quant = true;
  const LayerPolicy policy =
      LayerPolicy::parse(options("int4", "", "*.layer.5.*", "*.ffn.*=nf4,*.q_lin=int4:g=32:asym"), defaults);
  EXPECT_EQ(policy.precision_spec(), parse_format_spec("int4:g=64"));
  const LayerDecision q = policy.resolve(kQ, true);
  EXPECT_EQ(q.format, "int4:g=32:asym") << "the text as written, for reasons and messages";
  EXPECT_EQ(q.spec, parse_format_spec("int4:g=32:asym")) << "the rule's own options beat the defaults";
  EXPECT_EQ(policy.resolve(kFfn1, true).spec, parse_format_spec("nf4:dq"));
  const LayerDecision k = policy.resolve("distilbert.transformer.layer.0.attention.k_lin", true);
  EXPECT_EQ(k.spec, parse_format_spec("int4:g=64"));
  EXPECT_TRUE(k.quantized());
  const LayerDecision excluded = policy.resolve(kFfn5, true);
  EXPECT_EQ(excluded.spec.format, Format::fp32);
  EXPECT_FALSE(excluded.quantized());
  EXPECT_FALSE(policy.resolve(kClassifier, false).quantized());
}

TEST(LayerPolicy, ABadFormatIsOneLineFromParseAfterTheBadPatterns) {
  EXPECT_EQ(error_of([] { LayerPolicy::parse(options("int4:g=48")); }),
            "precision 'int4:g=48': int4 group size '48', expected 32, 64 or 128");
  EXPECT_EQ(error_of([] { LayerPolicy::parse(options("int8", "", "", "*.ffn.*=nf4:g=64")); }),
            "precision 'nf4:g=64': option 'g=64' applies to int4 only, not to nf4");
  // Syntax first: a bad pattern is named even where a format is bad too.
  EXPECT_NE(error_of([] { LayerPolicy::parse(options("int4:g=48", "a[b]")); }).find("--quant-include"),
            std::string::npos);
}

TEST(LayerPolicy, UniformIsTheDefaultSetInOnePrecisionAlreadyParsed) {
  const LayerPolicy policy = LayerPolicy::uniform(Precision("int4:g=64:asym"));
  EXPECT_EQ(policy.precision(), "int4:g=64:asym");
  const LayerDecision q = policy.resolve(kQ, true);
  EXPECT_EQ(q.spec, parse_format_spec("int4:g=64:asym"));
  EXPECT_EQ(q.reason, "block linear, --precision int4:g=64:asym");
  EXPECT_FALSE(policy.resolve(kClassifier, false).quantized());
  EXPECT_EQ(error_of([] { LayerPolicy::uniform(Precision("int9")); }), error_of([] { parse_format_spec("int9"); }));
}

TEST(Precision, IsTheTextAsWrittenAndItsSpecParsedOnce) {
  const Precision p = "int4";
  EXPECT_EQ(p.text(), "int4");
  ASSERT_TRUE(p.spec());
  EXPECT_EQ(*p.spec(), parse_format_spec("int4:g=128:sym"));
  EXPECT_EQ(p, "int4");
  EXPECT_EQ(p, std::string("int4"));
  EXPECT_FALSE(p == Precision("int4:g=128:sym")) << "equal formats, other texts: records keep what was written";
  EXPECT_EQ(fmt::format("[{}]", p), "[int4]");
  EXPECT_EQ(Precision().text(), "fp32");
  EXPECT_EQ(Precision().spec_or_fail().format, Format::fp32);
}

TEST(Precision, ATextThatIsNoSpecKeepsItsLineForWhoeverNeedsTheSpec) {
  const Precision label = std::string("torch-int8-dynamic");  // a Python API run's label
  EXPECT_FALSE(label.spec());
  EXPECT_EQ(label.text(), "torch-int8-dynamic");
  EXPECT_EQ(error_of([&] { (void)label.spec_or_fail(); }), error_of([] { parse_format_spec("torch-int8-dynamic"); }));
  const Precision contradicting = "int4:sym:asym";
  EXPECT_FALSE(contradicting.spec());
  EXPECT_EQ(error_of([&] { (void)contradicting.spec_or_fail(); }),
            "precision 'int4:sym:asym': options 'sym' and 'asym' contradict each other; expected one of them");
}

}  // namespace
