// Softmax cross-entropy over logits, plain or vocab-parallel. Vocab-parallel: each TP
// rank holds a contiguous slice [vocabStart, vocabStart + vocabLocal) of every row's
// logits; the row max is all-reduced (max), the sum of exponentials and the target's
// logit are all-reduced (sum), so no rank ever holds a whole row. Three small
// all-reduces of n values per call, whatever the vocabulary size.
#pragma once
#include <cstdint>

#include "training/nn/tp_group.h"

namespace braid {
namespace train {

/// Forward for n rows of logits [n, vocabLocal]. Writes probs [n, vocabLocal] (this
/// slice of the full softmax; may alias logits) and losses[n] (each row's
/// -log p(target)), and returns the mean loss. Throws std::out_of_range for a target
/// outside [0, vocabLocal * tpSize). tp null = plain cross-entropy.
template <class T>
T crossEntropyForward(const T* logits, const int32_t* targets, int64_t n, int64_t vocabLocal,
                      int64_t vocabStart, TpGroup<T>* tp, T* probs, T* losses);

/// dlogits [n, vocabLocal] = rowWeight * (probs - onehot(target)): the gradient when
/// every row's loss has weight `rowWeight` in the objective (a mean loss over n rows
/// weighted by w: rowWeight = w / n). Overwrites dlogits (may alias probs). No
/// communication.
template <class T>
void crossEntropyBackward(const T* probs, const int32_t* targets, int64_t n, int64_t vocabLocal,
                          int64_t vocabStart, T rowWeight, T* dlogits);

}  // namespace train
}  // namespace braid
