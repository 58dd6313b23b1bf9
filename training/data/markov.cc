// Random order-k Markov chain: generation, stationary distribution, entropy rate.
#include "training/data/markov.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "training/tensor/rng.h"

namespace braid {
namespace train {

const std::string& MarkovSource::symbols() {
  static const std::string s = " etaoinshrdlcumwfgypbvkjxqz.,\n";
  return s;
}

MarkovSource MarkovSource::random(uint64_t seed, int alphabet, int order, double sharpness) {
  if (alphabet < 2 || alphabet > int(symbols().size()))
    throw std::invalid_argument("MarkovSource: alphabet must be in [2, " +
                                std::to_string(symbols().size()) + "]");
  if (order < 0 || order > 4) throw std::invalid_argument("MarkovSource: order must be in [0, 4]");
  if (!(sharpness >= 0)) throw std::invalid_argument("MarkovSource: sharpness must be >= 0");
  MarkovSource m;
  m.alphabet_ = alphabet;
  m.order_ = order;
  for (int i = 0; i < order; ++i) m.contexts_ *= alphabet;
  m.p_.resize(size_t(m.contexts_ * alphabet));
  Rng rng(seed, 0x6d61726b6f76ull);
  for (int64_t c = 0; c < m.contexts_; ++c) {
    double* row = m.p_.data() + c * alphabet;
    double sum = 0;
    for (int j = 0; j < alphabet; ++j) sum += (row[j] = std::exp(sharpness * rng.normal()));
    for (int j = 0; j < alphabet; ++j) row[j] = 0.99 * row[j] / sum + 0.01 / alphabet;
  }
  return m;
}

std::string MarkovSource::generate(uint64_t seed, int64_t n) const {
  std::string out(size_t(std::max<int64_t>(n, 0)), ' ');
  Rng rng(seed, 0x67656eull);
  int64_t ctx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = p_.data() + ctx * alphabet_;
    const double u = rng.uniform();
    double acc = 0;
    int j = 0;
    for (; j < alphabet_ - 1; ++j) {
      acc += row[j];
      if (u < acc) break;
    }
    out[size_t(i)] = symbols()[size_t(j)];
    ctx = nextContext(ctx, j);
  }
  return out;
}

std::vector<double> MarkovSource::stationary() const {
  std::vector<double> pi(size_t(contexts_), 1.0 / double(contexts_)), next(pi.size());
  for (int it = 0; it < 100000; ++it) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t c = 0; c < contexts_; ++c)
      for (int j = 0; j < alphabet_; ++j)
        next[size_t(nextContext(c, j))] += pi[size_t(c)] * prob(c, j);
    double change = 0;
    for (size_t i = 0; i < pi.size(); ++i) change += std::fabs(next[i] - pi[i]);
    pi.swap(next);
    if (change < 1e-15) break;
  }
  return pi;
}

double MarkovSource::entropyRate() const {
  const std::vector<double> pi = stationary();
  double h = 0;
  for (int64_t c = 0; c < contexts_; ++c)
    for (int j = 0; j < alphabet_; ++j) {
      const double p = prob(c, j);
      if (p > 0) h -= pi[size_t(c)] * p * std::log(p);
    }
  return h;
}

double MarkovSource::crossEntropy(const std::string& text) const {
  int index[256];
  std::fill(std::begin(index), std::end(index), -1);
  for (int j = 0; j < alphabet_; ++j) index[static_cast<unsigned char>(symbols()[size_t(j)])] = j;
  int64_t ctx = 0, count = 0;
  double total = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const int j = index[static_cast<unsigned char>(text[i])];
    if (j < 0) throw std::invalid_argument("MarkovSource::crossEntropy: character outside the alphabet");
    if (int64_t(i) >= order_) {
      total -= std::log(prob(ctx, j));
      ++count;
    }
    ctx = nextContext(ctx, j);
  }
  return count ? total / double(count) : 0.0;
}

}  // namespace train
}  // namespace braid
