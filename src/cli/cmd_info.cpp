// `qjoule info --model DIR`: what a checkpoint holds, before anything runs; `qjoule info --formats`:
// the formats it can run.
#include <map>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/kernels/kernel_overrides.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/quant/format.h"

namespace qjoule::cli {
namespace {

struct Group {
  std::size_t tensors = 0;
  int64_t params = 0;
  std::size_t bytes = 0;
};

// "distilbert.transformer.layer.3.ffn.lin1.weight", "model.layers.3.mlp.up_proj.weight" or
// "h.3.mlp.c_fc.weight" -> "layer 3"; embeddings; head.
std::string group_of(const std::string& name) {
  // No std::regex: GCC 12 with ASan warns inside it (maybe-uninitialized), which -Werror turns fatal.
  for (const std::string marker : {".layer.", ".layers.", "h."}) {
    for (auto pos = name.find(marker); pos != std::string::npos; pos = name.find(marker, pos + 1)) {
      if (marker == "h." && pos != 0 && name[pos - 1] != '.') continue;
      std::size_t end = pos + marker.size();
      while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
      if (end > pos + marker.size() && end < name.size() && name[end] == '.')
        return fmt::format("layer {:>3}", std::stoi(name.substr(pos + marker.size(), end - pos - marker.size())));
    }
  }
  if (name.find("embeddings") != std::string::npos || name.find("embed_tokens") != std::string::npos ||
      name.find("wte.") != std::string::npos || name.find("wpe.") != std::string::npos)
    return "embeddings";
  return "head";
}

void print_decoder_config(const model::DecoderConfig& c) {
  fmt::print("architecture  {} ({})\n", c.architecture, c.model_type);
  fmt::print(
      "shapes        hidden {}, layers {}, heads {} ({} key/value, head size {}), FFN {} ({}), vocab {}, "
      "positions {}\n",
      c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.activation,
      c.vocab_size, c.max_positions);
  if (c.arch != model::DecoderArch::Gpt2)
    fmt::print("rope          theta {}, scaling {}{}\n", c.rope_theta, c.rope_scaling.type,
               c.rope_scaling.type == "default" ? "" : fmt::format(" (factor {})", c.rope_scaling.factor));
  if (c.moe.num_experts > 0) {
    fmt::print("experts       {} of FFN {} in {} of {} layers, top-{} a token ({}), router FP32\n", c.moe.num_experts,
               c.moe.expert_intermediate_size, c.moe_layer_count(), c.num_layers, c.moe.experts_per_token,
               c.moe.normalize_top_k ? "weights renormalised" : "softmax weights as they are");
  }
  fmt::print("head          lm_head {}\n", c.tie_word_embeddings ? "tied to the token embeddings" : "its own weights");
}

void run_info(const std::string& model_dir, bool list_tensors) {
  const auto ck = io::Checkpoint::open(model_dir);
  const bool decoder = model::model_family(model_dir) == model::ModelFamily::Decoder;
  std::vector<std::string> inferred;
  std::map<std::string, Group> groups;
  std::map<std::string, std::size_t> dtypes;
  int64_t params = 0;
  for (const auto& [name, t] : ck.tensors()) {
    auto& g = groups[group_of(name)];
    ++g.tensors;
    g.params += t.numel();
    g.bytes += t.nbytes;
    ++dtypes[std::string(io::dtype_name(t.dtype))];
    params += t.numel();
  }
  std::vector<std::string> dtype_list;
  for (const auto& [d, n] : dtypes) dtype_list.push_back(fmt::format("{} ({} tensors)", d, n));
  std::vector<std::string> files;
  for (const auto& f : ck.files()) files.push_back(f.filename().string());

  if (decoder) {
    const auto cfg = model::load_decoder_config(model_dir, ck);
    fmt::print("model         {}\n", model_dir);
    print_decoder_config(cfg);
    inferred = cfg.inferred_fields;
  } else {
    const auto cfg = model::load_encoder_config(model_dir, ck);
    fmt::print("model         {}\n", model_dir);
    fmt::print("architecture  {} ({})\n", cfg.architecture, cfg.model_type);
    fmt::print("shapes        hidden {}, layers {}, heads {} (head size {}), FFN {}, vocab {}, positions {}\n",
               cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.head_dim(), cfg.intermediate_size, cfg.vocab_size,
               cfg.max_positions);
    fmt::print("labels        {}: {}\n", cfg.num_labels, fmt::join(cfg.id2label, ", "));
    inferred = cfg.inferred_fields;
  }
  fmt::print("parameters    {} ({})\n", thousands(params), human_count(double(params)));
  fmt::print("dtypes        {}\n", fmt::join(dtype_list, ", "));
  fmt::print("on disk       {} ({}) in {}\n", human_bytes(double(ck.bytes_on_disk())),
             thousands(int64_t(ck.bytes_on_disk())), fmt::join(files, ", "));
  if (!inferred.empty())
    fmt::print("inferred      {} (absent from config.json, read off tensor shapes)\n", fmt::join(inferred, ", "));
  fmt::print("\n{:<12} {:>8} {:>14} {:>12}\n", "group", "tensors", "parameters", "bytes");
  for (const auto& [name, g] : groups)
    fmt::print("{:<12} {:>8} {:>14} {:>12}\n", name, g.tensors, thousands(g.params), human_bytes(double(g.bytes)));
  if (list_tensors) {
    fmt::print("\n{:<64} {:<8} {}\n", "tensor", "dtype", "shape");
    for (const auto& [name, t] : ck.tensors())
      fmt::print("{:<64} {:<8} {}\n", name, io::dtype_name(t.dtype), t.shape_string());
  }
}

// `qjoule info --formats`: the format table (quant/format.h), one row per format, where it runs and, under
// it, each backend's kernels with the path a record names (kernels/backend_registry.h).
void print_formats() {
  fmt::print("{:<5} {:>6}  {:<11} {:<9}  {}\n", "name", "bits/w", "kind", "devices", "what it is [options]");
  for (const quant::FormatTraits& t : quant::all_formats()) {
    const std::string kind = t.weight_only ? "weight-only" : t.quantizes_activations ? "w+act" : "dense";
    const bool cpu = kernels::runs_on(kernels::Backend::cpu, t.format);
    const bool cuda = kernels::runs_on(kernels::Backend::cuda, t.format);
    const std::string devices = cpu && cuda ? "cpu, cuda" : cpu ? "cpu" : cuda ? "cuda" : "none";
    fmt::print("{:<5} {:>6.3f}  {:<11} {:<9}  {}\n", t.name, t.bits_per_weight, kind, devices, t.doc);
    if (!t.options.empty()) fmt::print("{:<37}[{}]\n", "", t.options);
    for (const auto backend : {kernels::Backend::cpu, kernels::Backend::cuda}) {
      const kernels::BackendFormat* row = kernels::find_backend_format(backend, t.format);
      if (row == nullptr) continue;
      for (const auto& k : row->kernels)
        fmt::print("{:<6}{:<5}{:<12} {}\n", "", kernels::name(backend), k.isa, k.kernel_path);
    }
  }
  fmt::print(
      "\nA precision spec is NAME[:OPTION]..., e.g. int4:g=64:asym, nf4:dq, int8:sq=0.5 (SmoothQuant).\n"
      "Every CPU format but fp32 also takes :emulate (fake quantization, for accuracy studies only).\n"
      "bits/w counts per-block scales at the default options (int4: g=128, sym; nf4: FP32 absmax per 64).\n"
      "Per-row scales (int8, w8: FP32 per output row, +32/in bits) and per-tensor ones (fp8) depend on\n"
      "the layer's width and are not in it; a run's model_bytes counts every byte held.\n"
      "Under each format: each backend's kernels by ISA (GPU: compute capability) and the kernel path a\n"
      "record names when one runs (`*`: what is chosen at run time, e.g. oneDNN's implementation).\n");
}

}  // namespace

void add_info_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand(
      "info",
      "Describe a Hugging Face checkpoint (encoder classifier or decoder LM): architecture, shapes, parameters, "
      "dtypes, bytes on disk, tensors grouped by layer.");
  cmd->footer(
      "Examples:\n  qjoule info --model ../shared/data/models/sst2-distilbert-mini --tensors\n"
      "  qjoule info --formats\n  qjoule info --kernels");
  auto model = std::make_shared<std::string>();
  auto tensors = std::make_shared<bool>(false);
  auto formats = std::make_shared<bool>(false);
  auto kernel_choices = std::make_shared<bool>(false);
  cmd->add_option("--model", *model, "Model folder (config.json + model.safetensors or a sharded index)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--tensors", *tensors, "Also list every tensor with its dtype and shape");
  cmd->add_flag("--formats", *formats,
                "List the formats qjoule runs (--precision names), with bits per weight, "
                "devices and options");
  cmd->add_flag("--kernels", *kernel_choices,
                "List the kernel choices the environment may override (QJOULE_WEIGHT_ONLY_DECODE=x16, ...), "
                "what each chooses and its value now");
  cmd->callback([model, tensors, formats, kernel_choices] {
    if (*formats && !model->empty()) fail("info: --formats and --model are two questions; expected one of them");
    if (*kernel_choices && (*formats || !model->empty()))
      fail("info: --kernels and --{} are two questions; expected one of them", *formats ? "formats" : "model");
    if (*formats) {
      print_formats();
      return;
    }
    if (*kernel_choices) {
      fmt::print("{}", kernels::kernel_overrides_table());
      return;
    }
    if (model->empty())
      fail("info: --model DIR is required (or --formats for the format table); --kernels lists the kernel overrides");
    run_info(*model, *tensors);
  });
}

}  // namespace qjoule::cli
