// The format table (format.h) and the one precision-spec grammar (format_spec.h) every command uses.
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/formats.h"

namespace {

using namespace qjoule::quant;
using ::testing::HasSubstr;

using qjoule::test::error_of;

TEST(FormatTable, OneRowPerFormatWithUniqueNamesAndTokens) {
  std::set<std::string_view> names, tokens;
  for (const FormatTraits& t : all_formats()) {
    EXPECT_EQ(&traits(t.format), &t);
    EXPECT_EQ(find_format(t.name), t.format);
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    EXPECT_TRUE(tokens.insert(t.run_token).second) << t.run_token;
    EXPECT_GT(t.bits_per_weight, 0.0) << t.name;
    EXPECT_FALSE(t.doc.empty()) << t.name;
    EXPECT_LE(t.doc.size(), 63u) << t.name << ": `qjoule info --formats` fits in 100 columns";
  }
  EXPECT_EQ(all_formats().size(), 11u);
  EXPECT_EQ(find_format("int3"), std::nullopt);
  EXPECT_EQ(find_format("INT4"), std::nullopt);  // names are exact
  // Where each runs: tests/kernels/cpu/test_backend_registry.cpp (the backends' registries).
  EXPECT_EQ(fmt::format("{}", Format::nf4), "nf4");
}

TEST(FormatTable, BitsPerWeightComeFromTheLayouts) {
  EXPECT_EQ(traits(Format::int4).bits_per_weight, bits_per_weight<BlockInt4Sym<128>>());
  EXPECT_EQ(traits(Format::nf4).bits_per_weight, kNf4BitsPerWeight);
  EXPECT_EQ(traits(Format::fp16).bits_per_weight, kFp16BitsPerWeight);
  EXPECT_TRUE(traits(Format::w8).weight_only);
  EXPECT_TRUE(traits(Format::int8).quantizes_activations);
  EXPECT_FALSE(traits(Format::fp8).emulatable);
  EXPECT_TRUE(traits(Format::int4).emulatable);
}

TEST(FormatSpec, ParsesTheGrammar) {
  const FormatSpec a = parse_format_spec("int4:g=64:asym:a8");
  EXPECT_EQ(a.format, Format::int4);
  EXPECT_EQ(a.group_size, 64);
  EXPECT_TRUE(a.int4_asymmetric);
  EXPECT_TRUE(a.int4_int8_activations);
  EXPECT_FALSE(a.emulate);
  EXPECT_EQ(to_string(a), "int4:g=64:asym:a8");
  EXPECT_TRUE(parse_format_spec("nf4:dq").nf4_double_quant);
  EXPECT_TRUE(parse_format_spec("int8:emulate").emulate);
  EXPECT_EQ(parse_format_spec("int8:sq=0.5").smoothquant_alpha, 0.5f);
  EXPECT_EQ(to_string(parse_format_spec("int8:sq=0.25:emulate")), "int8:sq=0.25:emulate");
  EXPECT_EQ(parse_format_spec("fp8").format, Format::fp8);
  EXPECT_FALSE(parse_format_spec("fp32:emulate").emulate);  // fp32 is its own emulation
}

TEST(FormatSpec, OldSpellingsStillReadWithANote) {
  EXPECT_EQ(parse_format_spec("int4:g64:asym"), parse_format_spec("int4:g=64:asym"));
  EXPECT_EQ(parse_format_spec("int8:sq0.5"), parse_format_spec("int8:sq=0.5"));
  EXPECT_EQ(old_spelling_note("int4:g64:asym"),
            "precision 'int4:g64:asym': 'g64' is the old spelling of 'g=64' (still read)");
  EXPECT_EQ(old_spelling_note("int8:sq0.5"),
            "precision 'int8:sq0.5': 'sq0.5' is the old spelling of 'sq=0.5' (still read)");
  EXPECT_EQ(old_spelling_note("int4:g=64:sym"), "");
  EXPECT_EQ(old_spelling_note("nf4:dq"), "");
}

TEST(FormatSpec, RoundTripsEveryCanonicalSpec) {
  for (const char* spec : {"fp32", "bf16", "fp16", "int8", "int8:sq=0.75", "w8", "int4:g=32:sym", "int4:g=128:asym:a8",
                           "int4:g=128:sym:gptq", "int4:g=64:asym:gptq:actorder", "int4:g=32:sym:awq", "nf4", "nf4:dq",
                           "tf32", "fp8", "w8:emulate", "nf4:dq:emulate"}) {
    const FormatSpec f = parse_format_spec(spec);
    EXPECT_EQ(to_string(f), spec);
    EXPECT_EQ(parse_format_spec(to_string(f)), f) << spec;
  }
}

TEST(FormatSpec, DefaultsFillWhatTheSpecLeavesOutAndOnlyWhereTheyApply) {
  FormatSpec defaults;
  defaults.group_size = 32;
  defaults.int4_asymmetric = true;
  defaults.nf4_double_quant = true;
  defaults.emulate = true;
  const FormatSpec d = parse_format_spec("int4", defaults);
  EXPECT_EQ(d.group_size, 32);
  EXPECT_TRUE(d.int4_asymmetric);
  EXPECT_TRUE(d.emulate);
  EXPECT_EQ(parse_format_spec("int4:g=128:sym", defaults).group_size, 128);
  EXPECT_FALSE(parse_format_spec("int4:sym", defaults).int4_asymmetric);
  // A group size means nothing to nf4, and fp32 has nothing to emulate: equal formats compare equal.
  EXPECT_EQ(parse_format_spec("nf4", defaults), parse_format_spec("nf4:dq:emulate"));
  EXPECT_EQ(parse_format_spec("fp32", defaults), parse_format_spec("fp32"));
}

TEST(FormatSpec, RunTokensKeepTheirNames) {
  // Run names identify results on --resume: these tokens must not change.
  EXPECT_EQ(run_token(parse_format_spec("fp32")), "fp32");
  EXPECT_EQ(run_token(parse_format_spec("int8")), "int8_w8a8");
  EXPECT_EQ(run_token(parse_format_spec("int8:sq0.5")), "int8_w8a8_sq0.5");
  EXPECT_EQ(run_token(parse_format_spec("int8:sq=0.5")), "int8_w8a8_sq0.5");
  EXPECT_EQ(run_token(parse_format_spec("w8")), "w8a32");
  EXPECT_EQ(run_token(parse_format_spec("int4")), "int4_g128_sym");
  EXPECT_EQ(run_token(parse_format_spec("int4:g=64:asym")), "int4_g64_asym");
  EXPECT_EQ(run_token(parse_format_spec("int4:a8")), "int4_g128_sym_a8");
  EXPECT_EQ(run_token(parse_format_spec("nf4:dq")), "nf4_dq");
  EXPECT_EQ(run_token(parse_format_spec("int4:gptq")), "int4_g128_sym_gptq");
  EXPECT_EQ(run_token(parse_format_spec("int4:actorder:gptq:g=32")), "int4_g32_sym_gptq_actorder");
  EXPECT_EQ(run_token(parse_format_spec("int4:awq:asym")), "int4_g128_asym_awq");
  EXPECT_EQ(run_token(parse_format_spec("bf16:emulate")), "bf16_emulated");
}

TEST(FormatSpec, BadSpecsAreOneLineNamingSpecOptionAndFormat) {
  EXPECT_THAT(error_of([] { parse_format_spec("int3"); }),
              HasSubstr("precision 'int3': unknown format 'int3'; expected one of fp32, bf16, fp16, int8, w8, int4, "
                        "nf4, tf32, fp8, mxfp4, nvfp4"));
  EXPECT_THAT(error_of([] { parse_format_spec(""); }), HasSubstr("precision '': unknown format ''"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:g=64"); }),
              HasSubstr("precision 'int8:g=64': option 'g=64' applies to int4 only, not to int8"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:dq"); }),
              HasSubstr("option 'dq' applies to nf4 only, not to int4"));
  EXPECT_THAT(error_of([] { parse_format_spec("w8:sq=0.5"); }),
              HasSubstr("option 'sq=0.5' applies to int8 only, not to w8"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:g=48"); }),
              HasSubstr("precision 'int4:g=48': int4 group size '48', expected 32, 64 or 128"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:gx"); }), HasSubstr("unknown option 'gx'"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:sq=abc"); }),
              HasSubstr("SmoothQuant alpha 'abc' is not a number, expected sq=ALPHA with ALPHA in [0, 1]"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:sq=1.5"); }), HasSubstr("SmoothQuant alpha 1.5 is outside [0, 1]"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:sq="); }), HasSubstr("is not a number"));
  EXPECT_THAT(error_of([] { parse_format_spec("fp8:emulate"); }),
              HasSubstr("precision 'fp8:emulate': fp8 takes no options (one fixed scheme"));
  FormatSpec bad_group;
  bad_group.group_size = 48;
  EXPECT_THAT(error_of([&] { parse_format_spec("int4", bad_group); }), HasSubstr("int4 group size 48"));
  EXPECT_EQ(try_parse_format_spec("int4:g=48"), std::nullopt);
  EXPECT_EQ(try_parse_format_spec("nf4")->format, Format::nf4);
}

TEST(FormatSpec, CalibrationOptionsAreInt4sAndGptqsOwn) {
  EXPECT_TRUE(needs_calibration(parse_format_spec("int4:gptq")));
  EXPECT_TRUE(needs_calibration(parse_format_spec("int4:awq")));
  EXPECT_EQ(calibration_method(parse_format_spec("int4:awq")), "AWQ");
  EXPECT_EQ(to_string(round_to_nearest(parse_format_spec("int4:g=64:awq:a8"))), "int4:g=64:sym:a8");
  EXPECT_THAT(error_of([] { parse_format_spec("nf4:awq"); }),
              HasSubstr("precision 'nf4:awq': option 'awq' applies to int4 only, not to nf4"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:gptq:awq"); }),
              HasSubstr("precision 'int4:gptq:awq': options 'gptq' and 'awq' contradict each other; expected one "
                        "calibration method"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:awq:emulate"); }),
              HasSubstr("options 'awq' and 'emulate' contradict each other"));
  EXPECT_FALSE(needs_calibration(parse_format_spec("int4")));
  EXPECT_THAT(error_of([] { parse_format_spec("nf4:gptq"); }),
              HasSubstr("precision 'nf4:gptq': option 'gptq' applies to int4 only, not to nf4"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:actorder"); }),
              HasSubstr("precision 'int4:actorder': option 'actorder' orders GPTQ's columns; expected it with 'gptq'"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:gptq:emulate"); }),
              HasSubstr("options 'gptq' and 'emulate' contradict each other"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:gptq:gptq"); }), HasSubstr("option 'gptq' is given twice"));
  FormatSpec defaults;  // a calibrated int4 default does not follow a spec to another format
  defaults.int4_gptq = true;
  EXPECT_EQ(parse_format_spec("w8", defaults), parse_format_spec("w8"));
}

TEST(FormatSpec, OptionsThatContradictOrRepeatAreRefusedNotLastOneWins) {
  EXPECT_THAT(error_of([] { parse_format_spec("int4:g=64:g=128"); }),
              HasSubstr("precision 'int4:g=64:g=128': options 'g=64' and 'g=128' contradict each other; expected one "
                        "of them"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:sym:asym"); }),
              HasSubstr("options 'sym' and 'asym' contradict each other"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:sq=0.5:sq=0.8"); }),
              HasSubstr("options 'sq=0.5' and 'sq=0.8' contradict each other"));
  EXPECT_THAT(error_of([] { parse_format_spec("nf4:dq:dq"); }),
              HasSubstr("precision 'nf4:dq:dq': option 'dq' is given twice; expected it once"));
  EXPECT_THAT(error_of([] { parse_format_spec("int4:asym:g=64:asym"); }), HasSubstr("option 'asym' is given twice"));
  EXPECT_THAT(error_of([] { parse_format_spec("int8:emulate:emulate"); }), HasSubstr("'emulate' is given twice"));
  // Different options together are fine, in any order.
  EXPECT_EQ(to_string(parse_format_spec("int4:asym:g=64:a8")), "int4:g=64:asym:a8");
}

}  // namespace
