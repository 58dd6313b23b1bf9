// Tensor<T>: a dense, row-major, contiguous array with a shape. It either owns its
// storage or views memory owned elsewhere (a parameter arena, a gathered FSDP buffer).
// No autograd, no strides: modules compute forward and backward explicitly on raw
// buffers (training/nn/), so a Tensor is little more than (pointer, shape).
// T is float (training) or double (finite-difference gradient checks).
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid {
namespace train {

using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar, i.e. an empty shape).
inline int64_t numelOf(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// "[2, 3, 4]" ("[]" for a scalar shape), for error messages.
std::string shapeString(const Shape& s);

template <class T>
class Tensor {
 public:
  Tensor() = default;
  /// An owning, zero-filled tensor.
  explicit Tensor(Shape shape) : shape_(std::move(shape)), own_(size_t(numelOf(shape_))) {
    ptr_ = own_.data();
  }
  Tensor(std::initializer_list<int64_t> shape) : Tensor(Shape(shape)) {}
  /// A non-owning view of `data` (which must outlive the view).
  static Tensor view(T* data, Shape shape) {
    Tensor t;
    t.shape_ = std::move(shape);
    t.ptr_ = data;
    return t;
  }
  Tensor(const Tensor& o) : shape_(o.shape_) { copyFrom(o); }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      shape_ = o.shape_;
      copyFrom(o);
    }
    return *this;
  }
  /// Moves leave the source empty (no shape, null data): a moved-from tensor never
  /// aliases the storage it handed over (a later copy of it would read freed memory).
  Tensor(Tensor&& o) noexcept
      : shape_(std::move(o.shape_)), own_(std::move(o.own_)), ptr_(o.ptr_) {
    o.release();
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      shape_ = std::move(o.shape_);
      own_ = std::move(o.own_);  // std::allocator: the buffer itself moves, ptr_ stays valid
      ptr_ = o.ptr_;
      o.release();
    }
    return *this;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(size_t(i < 0 ? int(shape_.size()) + i : i)); }
  int rank() const { return int(shape_.size()); }
  int64_t numel() const { return numelOf(shape_); }
  bool owning() const { return ptr_ == own_.data() && !own_.empty(); }
  /// No storage (default-constructed, moved-from, or a copy of such): data() is null.
  /// (numel() still follows the shape: 1 for the empty shape of a default tensor.)
  bool empty() const { return ptr_ == nullptr; }
  T& operator[](int64_t i) { return ptr_[i]; }
  const T& operator[](int64_t i) const { return ptr_[i]; }

  /// Reallocates as an owning zero-filled tensor of `shape` (no-op on the storage when
  /// the element count is unchanged and the tensor owns it; values are zeroed anyway).
  void reset(Shape shape) {
    shape_ = std::move(shape);
    own_.assign(size_t(numelOf(shape_)), T(0));
    ptr_ = own_.data();
  }
  /// Same storage, another shape of the same element count.
  void reshape(Shape shape) {
    if (numelOf(shape) != numel())
      throw std::invalid_argument("Tensor::reshape: " + shapeString(shape_) + " -> " +
                                  shapeString(shape));
    shape_ = std::move(shape);
  }
  void zero() {
    if (ptr_) std::memset(static_cast<void*>(ptr_), 0, sizeof(T) * size_t(numel()));
  }

 private:
  void copyFrom(const Tensor& o) {  // a copy always owns (an empty tensor stays empty)
    if (o.ptr_ == nullptr) {
      own_.clear();
      ptr_ = nullptr;
      return;
    }
    own_.assign(o.ptr_, o.ptr_ + o.numel());
    ptr_ = own_.data();
  }
  void release() noexcept {
    shape_.clear();
    own_.clear();
    ptr_ = nullptr;
  }
  Shape shape_;
  std::vector<T> own_;
  T* ptr_ = nullptr;
};

}  // namespace train
}  // namespace braid
