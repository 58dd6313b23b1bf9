// Character-level text dataset: vocabulary, split, deterministic batch sampling.
#include "training/data/text_dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "training/tensor/rng.h"

namespace braid {
namespace train {

TextDataset TextDataset::fromFile(const std::string& path, double validationFraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("TextDataset: cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("TextDataset: error reading " + path);
  return fromText(ss.str(), validationFraction);
}

TextDataset TextDataset::fromText(const std::string& text, double validationFraction) {
  if (!(validationFraction >= 0.0 && validationFraction < 1.0))
    throw std::invalid_argument("TextDataset: validationFraction must be in [0, 1)");
  if (text.size() < 2) throw std::runtime_error("TextDataset: text shorter than 2 characters");
  TextDataset d;
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  std::fill(std::begin(d.index_), std::end(d.index_), -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      d.index_[c] = int32_t(d.vocab_.size());
      d.vocab_.push_back(char(c));
    }
  std::vector<int32_t> all(text.size());
  for (size_t i = 0; i < text.size(); ++i) all[i] = d.index_[static_cast<unsigned char>(text[i])];
  const size_t nTrain = text.size() - size_t(std::floor(double(text.size()) * validationFraction));
  d.train_.assign(all.begin(), all.begin() + std::ptrdiff_t(nTrain));
  d.validation_.assign(all.begin() + std::ptrdiff_t(nTrain), all.end());
  return d;
}

std::vector<int32_t> TextDataset::encode(const std::string& text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t id = index_[static_cast<unsigned char>(text[i])];
    if (id < 0)
      throw std::invalid_argument("TextDataset::encode: character code " +
                                  std::to_string(int(static_cast<unsigned char>(text[i]))) +
                                  " not in the vocabulary");
    out[i] = id;
  }
  return out;
}

std::string TextDataset::decode(const int32_t* ids, int64_t n) const {
  std::string out(size_t(std::max<int64_t>(n, 0)), '\0');
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocabSize())
      throw std::out_of_range("TextDataset::decode: id " + std::to_string(ids[i]));
    out[size_t(i)] = vocab_[size_t(ids[i])];
  }
  return out;
}

Batch TextDataset::batch(Split split, uint64_t seed, int64_t step, int64_t B, int64_t T) const {
  const std::vector<int32_t>& src = tokens(split);
  if (B < 1 || T < 1) throw std::invalid_argument("TextDataset::batch: B and T must be >= 1");
  if (int64_t(src.size()) < T + 1)
    throw std::invalid_argument("TextDataset::batch: split has " + std::to_string(src.size()) +
                                " tokens, fewer than T+1 = " + std::to_string(T + 1));
  Batch b;
  b.B = B;
  b.T = T;
  b.tokens.resize(size_t(B * T));
  b.targets.resize(size_t(B * T));
  Rng rng(mixSeeds(seed, split == Split::kTrain ? 0x7472ull : 0x76616cull), uint64_t(step));
  const uint64_t starts = uint64_t(int64_t(src.size()) - T);  // windows [s, s+T] fit
  for (int64_t i = 0; i < B; ++i) {
    const size_t s = size_t(rng.below(starts));
    std::copy(src.begin() + std::ptrdiff_t(s), src.begin() + std::ptrdiff_t(s + size_t(T)),
              b.tokens.begin() + std::ptrdiff_t(i * T));
    std::copy(src.begin() + std::ptrdiff_t(s + 1), src.begin() + std::ptrdiff_t(s + size_t(T) + 1),
              b.targets.begin() + std::ptrdiff_t(i * T));
  }
  return b;
}

Micro sliceMicro(const Batch& batch, int dpRank, int dpSize, int micro, int numMicro) {
  if (dpSize < 1 || numMicro < 1 || dpRank < 0 || dpRank >= dpSize || micro < 0 ||
      micro >= numMicro)
    throw std::invalid_argument("sliceMicro: bad rank/micro indices");
  const int64_t parts = int64_t(dpSize) * numMicro;
  if (batch.B % parts != 0)
    throw std::invalid_argument("sliceMicro: batch B " + std::to_string(batch.B) +
                                " not divisible by dpSize * numMicro = " + std::to_string(parts));
  const int64_t per = batch.B / parts;
  const int64_t first = int64_t(dpRank) * (batch.B / dpSize) + int64_t(micro) * per;
  return Micro{batch.tokens.data() + first * batch.T, batch.targets.data() + first * batch.T,
               per, batch.T};
}

double unigramEntropy(const int32_t* tokens, int64_t n, int64_t vocab) {
  if (n <= 0) return 0.0;
  std::vector<int64_t> counts(size_t(std::max<int64_t>(vocab, 1)), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      throw std::out_of_range("unigramEntropy: token " + std::to_string(tokens[i]));
    ++counts[size_t(tokens[i])];
  }
  double h = 0;
  for (int64_t c : counts)
    if (c) {
      const double p = double(c) / double(n);
      h -= p * std::log(p);
    }
  return h;
}

}  // namespace train
}  // namespace braid
