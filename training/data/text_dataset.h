// TextDataset: a character-level corpus. The vocabulary is the sorted set of distinct
// bytes of the text; the first 90% of the encoded text is the training split, the last
// 10% the validation split. Batches are sampled deterministically from (seed, step):
// every rank computes the same global batch and takes its own slice (sliceMicro), so
// any data-parallel / microbatch layout trains on exactly the tokens one process would.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/model/layer.h"

namespace braid {
namespace train {

/// Which part of the corpus: the first 90% (train) or the last 10% (validation).
enum class Split : uint8_t { kTrain, kValidation };

/// A global batch: B sequences of T tokens and their next-token targets, row-major.
struct Batch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens, targets;  ///< [B*T] each
  /// The whole batch as one Micro (pointers into this Batch).
  Micro micro() const { return Micro{tokens.data(), targets.data(), B, T}; }
};

/// A character-level corpus (see the file comment).
class TextDataset {
 public:
  /// Reads a whole file; throws std::runtime_error if it cannot be read or is too short.
  static TextDataset fromFile(const std::string& path, double validationFraction = 0.1);
  /// Builds from text in memory (same rules as fromFile).
  static TextDataset fromText(const std::string& text, double validationFraction = 0.1);

  /// The sorted distinct characters; token id i is vocab()[i].
  const std::string& vocab() const { return vocab_; }
  /// Number of distinct characters.
  int64_t vocabSize() const { return int64_t(vocab_.size()); }
  /// Token ids of `text`; throws std::invalid_argument for a character not in the vocab.
  std::vector<int32_t> encode(const std::string& text) const;
  /// The text of n token ids; throws std::out_of_range for an id outside the vocab.
  std::string decode(const int32_t* ids, int64_t n) const;
  /// The encoded split.
  const std::vector<int32_t>& tokens(Split split) const {
    return split == Split::kTrain ? train_ : validation_;
  }

  /// Step `step`'s batch of `split`: B windows of T+1 tokens at offsets drawn from
  /// (seed, split, step); tokens are the first T of each window, targets the last T.
  /// The same on every rank. Throws std::invalid_argument when the split has fewer than
  /// T+1 tokens or B, T < 1.
  Batch batch(Split split, uint64_t seed, int64_t step, int64_t B, int64_t T) const;

 private:
  std::string vocab_;
  int32_t index_[256];
  std::vector<int32_t> train_, validation_;
};

/// The part of a global batch that data-parallel rank `dpRank` of `dpSize` runs as
/// microbatch `micro` of `numMicro`: sequences [r*B/d + m*B/(d*M), ... + B/(d*M)).
/// Throws std::invalid_argument unless B is divisible by dpSize * numMicro and the
/// indices are in range. The Micro points into `batch`.
Micro sliceMicro(const Batch& batch, int dpRank, int dpSize, int micro, int numMicro);

/// Entropy (nats) of the empirical unigram distribution of n tokens in [0, vocab): the
/// loss of a model that ignores context, the baseline a trained model must beat.
double unigramEntropy(const int32_t* tokens, int64_t n, int64_t vocab);

/// v rounded up to a multiple of `multiple` (a vocabulary padded for a TP size).
inline int64_t paddedVocab(int64_t v, int64_t multiple) {
  return multiple <= 1 ? v : (v + multiple - 1) / multiple * multiple;
}

}  // namespace train
}  // namespace braid
