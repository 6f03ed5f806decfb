// The KL base: an FP32 run's log-probabilities over a text's scored tokens, saved so that a quantized
// run over the same tokens can report KL divergence, same-top-token rate, RMS Δp and ΔPPL against it
// (`qjoule ppl --save-kl-base FILE` / `--kl-base FILE`, and the reference of `qjoule bench --text`), as
// llama.cpp's perplexity tool does.
//
// File layout (little-endian), version 2 (magic "QJKLBAS2"; version 1, "QJKLBAS1", still reads: it
// has no identity, and its reserved field is 0):
//   char[8]  magic
//   int32    vocab_size            int32  identity_bytes (I, a multiple of 4; 0 in version 1)
//   int64    ctx, stride, n_tokens, scored
//   float64  nll_sum               (of the base run: its perplexity is exp(nll_sum / scored))
//   int32    token_ids[n_tokens]   (byte 56 on)
//   char     identity[I]           JSON object text padded with spaces: what the base was computed from
//                                  (model identity, text, --max-tokens; see bench/lm_quality.h)
//   uint16   log_probs[scored][vocab_size]   FP16 log-softmax of the base model for each scored token,
//                                            in scoring order (FP16 keeps ~3 significant digits of a
//                                            log-probability: enough for KL, and half of FP32's size)
// Size: scored × vocab × 2 bytes (e.g. 32,000 vocab × 4,096 scored tokens = 250 MiB).
//
// read_kl_base maps the file rather than reading it, so a base costs memory only while it is compared
// with. KlBaseWriter writes one window at a time and can resume a killed computation (see below).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace qjoule::io {
class MappedFile;
}

namespace qjoule::eval {

struct KlBase {
  int32_t vocab_size = 0;
  int64_t ctx = 0, stride = 0;
  std::vector<int32_t> token_ids;
  int64_t scored = 0;
  double nll_sum = 0.0;
  std::string identity;             // JSON object text ("" in version 1); trailing padding removed
  std::vector<uint16_t> log_probs;  // [scored, vocab_size] FP16 bits, when built in memory
  // When read from a file: the mapped file and its log-probabilities (log_probs stays empty).
  std::shared_ptr<const io::MappedFile> mapped;
  const uint16_t* mapped_log_probs = nullptr;

  double ppl() const;
  // The [scored, vocab_size] FP16 log-probabilities, in memory or mapped.
  const uint16_t* rows() const { return mapped_log_probs != nullptr ? mapped_log_probs : log_probs.data(); }
};

// Writes a whole base built in memory (log_probs filled), atomically (a temporary file, fsync, rename).
void write_kl_base(const std::filesystem::path& path, const KlBase& base);

// Reads and validates a KL base: magic, version, sizes against the file length, the identity as a
// JSON object, and every token id inside [0, vocab_size); any failure is one line naming the file
// and what was found. `flag` names where the path came from in those lines ("--kl-base").
KlBase read_kl_base(const std::filesystem::path& path, const std::string& flag = "--kl-base");

// Writes a base one scored window at a time, so that a long FP32 reference that is killed loses at
// most the window in progress:
//   PATH.partial          the file being written: header (nll_sum 0 until finished), token ids,
//                         identity, then each finished window's rows, appended and fsynced;
//   PATH.partial.windows  one line per finished window, "<window> <scored> <nll_sum as %a>",
//                         appended and fsynced after its rows.
// A writer opened on a PATH.partial whose header, token ids and identity equal `header`'s keeps the
// windows its journal lists (rows beyond them, from a window cut short, are truncated away) and
// starts after them; anything else found there is replaced. finish() writes the NLL sum into the
// header, fsyncs, renames PATH.partial to PATH and removes the journal.
class KlBaseWriter {
 public:
  // `header`: every field but log_probs, nll_sum and mapped; `flag` names the file's option in errors.
  // Without `resume`, a partial file found there is replaced whatever it holds.
  KlBaseWriter(std::filesystem::path path, const KlBase& header, std::string flag, bool resume = true);
  ~KlBaseWriter();
  KlBaseWriter(const KlBaseWriter&) = delete;
  KlBaseWriter& operator=(const KlBaseWriter&) = delete;

  int64_t windows_done() const { return windows_done_; }
  int64_t scored_done() const { return scored_done_; }
  double nll_done() const { return nll_done_; }

  // Window `window` (must be windows_done()) scored `count` tokens with NLL sum `nll`; `rows` holds
  // their count × vocab FP16 log-probabilities.
  void append_window(int64_t window, const uint16_t* rows, int64_t count, double nll);
  // Every window written: checks the count against the header's `scored`, then puts the file in place.
  void finish();

 private:
  std::filesystem::path path_, partial_, journal_;
  std::string flag_;
  int64_t vocab_ = 0, scored_ = 0;
  int fd_ = -1, journal_fd_ = -1;
  int64_t windows_done_ = 0, scored_done_ = 0;
  double nll_done_ = 0.0;
};

}  // namespace qjoule::eval
