// MarkovSource: a seeded random order-k character Markov chain, the corpus of a fresh
// machine (no tinyshakespeare) and of tests. Its entropy rate, computed exactly from the
// stationary distribution of contexts, is the loss floor no model can beat: a model that
// trains well approaches it from above.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid {
namespace train {

/// A seeded random order-k Markov chain over characters (see the file comment).
class MarkovSource {
 public:
  /// A random chain over the first `alphabet` characters of symbols() (2..30) with
  /// context length `order` (0..4). Each context's next-character distribution is
  /// p_j ~ exp(sharpness * z_j) with z_j ~ N(0, 1) from `seed`, mixed with 1% of uniform
  /// so that the chain is ergodic; larger sharpness = more predictable text.
  /// Throws std::invalid_argument for out-of-range arguments.
  static MarkovSource random(uint64_t seed, int alphabet = 16, int order = 2,
                             double sharpness = 2.0);

  /// n characters of the chain, starting from context 0, with randomness from `seed`.
  std::string generate(uint64_t seed, int64_t n) const;
  /// Exact entropy rate in nats/char: -sum_c pi(c) sum_j P(j|c) log P(j|c).
  double entropyRate() const;
  /// Stationary distribution over contexts (alphabet^order of them; power iteration).
  std::vector<double> stationary() const;
  /// Mean -log P(text[i] | previous `order` chars) over i >= order: the loss of the true
  /// model on `text`. Throws std::invalid_argument for a character outside the alphabet.
  double crossEntropy(const std::string& text) const;
  /// P(next | context), context index in base `alphabet`, most recent character last.
  double prob(int64_t context, int next) const { return p_[size_t(context * alphabet_ + next)]; }
  /// Number of symbols.
  int alphabet() const { return alphabet_; }
  /// Context length k.
  int order() const { return order_; }
  /// alphabet^order.
  int64_t numContexts() const { return contexts_; }
  /// The character set, in order of symbol index.
  static const std::string& symbols();

 private:
  int64_t nextContext(int64_t c, int j) const {
    return order_ == 0 ? 0 : (c * alphabet_) % contexts_ + j;
  }
  int alphabet_ = 0, order_ = 0;
  int64_t contexts_ = 1;
  std::vector<double> p_;  ///< [contexts, alphabet]
};

}  // namespace train
}  // namespace braid
