// A loss plot written as a PNG without a plotting library (braid-train's --plot): the
// training loss per step (blue line), the validation loss (orange squares) and a
// reference loss (the unigram baseline, dashed red), on axes with numbered ticks, drawn
// on an RGB canvas and written by libpng (Debian libpng-dev). Header-only: the
// training/app/ folder builds one program per .cc file.
#pragma once
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace braid {
namespace train {
namespace plot {

/// An RGB canvas with the few primitives the plot needs.
class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * size_t(h) * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  void set(int x, int y, uint32_t rgb) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = &px_[(size_t(y) * size_t(w_) + size_t(x)) * 3];
    p[0] = uint8_t(rgb >> 16);
    p[1] = uint8_t(rgb >> 8);
    p[2] = uint8_t(rgb);
  }
  /// A line from (x0, y0) to (x1, y1), `thick` pixels wide; dash > 0: on/off runs.
  void line(int x0, int y0, int x1, int y1, uint32_t rgb, int thick = 1, int dash = 0) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy, n = 0;
    for (;;) {
      if (dash <= 0 || (n / dash) % 2 == 0)
        for (int a = 0; a < thick; ++a)
          for (int b = 0; b < thick; ++b) set(x0 + a - thick / 2, y0 + b - thick / 2, rgb);
      ++n;
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  void box(int x, int y, int r, uint32_t rgb) {
    for (int a = -r; a <= r; ++a)
      for (int b = -r; b <= r; ++b) set(x + a, y + b, rgb);
  }
  /// Digits, '.', '-' and ' ' in a 3x5 font scaled by `s`; (x, y) is the top left.
  void text(int x, int y, const std::string& t, uint32_t rgb, int s = 2) {
    static const char* kGlyphs[] = {
        "111101101101111", "010110010010111", "111001111100111", "111001111001111",
        "101101111001001", "111100111001111", "111100111101111", "111001001001001",
        "111101111101111", "111101111001111", "000000000000010", "000000111000000"};
    for (char c : t) {
      int g = c >= '0' && c <= '9' ? c - '0' : c == '.' ? 10 : c == '-' ? 11 : -1;
      if (g >= 0)
        for (int r = 0; r < 5; ++r)
          for (int col = 0; col < 3; ++col)
            if (kGlyphs[g][r * 3 + col] == '1')
              for (int a = 0; a < s; ++a)
                for (int b = 0; b < s; ++b) set(x + col * s + a, y + r * s + b, rgb);
      x += 4 * s;
    }
  }
  static int textWidth(const std::string& t, int s = 2) { return int(t.size()) * 4 * s - s; }

  /// Writes the canvas as a PNG (libpng: 8-bit RGB, deflated); false and *err on an
  /// error (the file cannot be written, or libpng gave up on it).
  bool writePng(const std::string& path, std::string* err) const {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
      if (err) *err = "cannot write " + path + ": " + std::strerror(errno);
      return false;
    }
    std::vector<png_bytep> rows(static_cast<size_t>(h_));
    for (int y = 0; y < h_; ++y)
      rows[size_t(y)] = const_cast<png_bytep>(&px_[size_t(y) * size_t(w_) * 3]);
    bool ok = encode(f, rows.data(), w_, h_);
    if (std::fclose(f) != 0) ok = false;
    if (!ok) {
      std::remove(path.c_str());  // no partial file left behind
      if (err) *err = "writing the PNG " + path + " failed (libpng or the disk)";
    }
    return ok;
  }

 private:
  /// The libpng calls alone: libpng reports a failure by longjmp back to the setjmp
  /// here, so nothing in this function is changed after it or has a destructor.
  static bool encode(FILE* f, png_bytep* rows, int w, int h) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    if (!png) return false;
    png_infop info = png_create_info_struct(png);
    if (!info) {
      png_destroy_write_struct(&png, nullptr);
      return false;
    }
    if (setjmp(png_jmpbuf(png))) {
      png_destroy_write_struct(&png, &info);
      return false;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    return true;
  }

  int w_, h_;
  std::vector<uint8_t> px_;
};

/// A "nice" tick step (1, 2 or 5 times a power of ten) for about `n` ticks over `span`.
inline double tickStep(double span, int n) {
  const double raw = span / std::max(1, n);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

/// Training loss (per step), validation loss (at some steps), a horizontal reference
/// (NaN: none) -> `path`. Returns false with *err on failure (or when there is nothing
/// to plot).
inline bool writeLossPlot(const std::string& path, const std::vector<int64_t>& steps,
                          const std::vector<double>& loss, const std::vector<int64_t>& valSteps,
                          const std::vector<double>& val, double reference, std::string* err) {
  if (steps.empty() || steps.size() != loss.size() || valSteps.size() != val.size()) {
    if (err) *err = "nothing to plot";
    return false;
  }
  const int W = 800, H = 500, left = 70, right = 20, top = 20, bottom = 40;
  Canvas c(W, H);
  double lo = 1e300, hi = -1e300;
  for (const std::vector<double>* v : {&loss, &val})
    for (double x : *v)
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (std::isfinite(reference)) lo = std::min(lo, reference), hi = std::max(hi, reference);
  if (!(hi >= lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1;
  const double pad = 0.04 * (hi - lo);
  lo -= pad;
  hi += pad;
  const double x0 = double(steps.front()), x1 = std::max(double(steps.back()), x0 + 1);
  auto px = [&](double s) { return left + int(std::lround((s - x0) / (x1 - x0) * (W - left - right))); };
  auto py = [&](double l) { return H - bottom - int(std::lround((l - lo) / (hi - lo) * (H - top - bottom))); };
  // Grid and tick labels.
  const double ys = tickStep(hi - lo, 6);
  for (double t = std::ceil(lo / ys) * ys; t <= hi; t += ys) {
    c.line(left, py(t), W - right, py(t), 0xE0E0E0);
    char b[32];
    std::snprintf(b, sizeof(b), ys < 0.1 ? "%.2f" : "%.1f", t);
    c.text(left - 8 - Canvas::textWidth(b), py(t) - 5, b, 0x000000);
  }
  const double xs = std::max(1.0, tickStep(x1 - x0, 8));  // steps are whole numbers
  for (double t = std::ceil(x0 / xs) * xs; t <= x1; t += xs) {
    c.line(px(t), top, px(t), H - bottom, 0xF0F0F0);
    const std::string s = std::to_string(int64_t(std::llround(t)));
    c.text(px(t) - Canvas::textWidth(s) / 2, H - bottom + 8, s, 0x000000);
  }
  c.line(left, top, left, H - bottom, 0x000000);
  c.line(left, H - bottom, W - right, H - bottom, 0x000000);
  if (std::isfinite(reference)) c.line(left, py(reference), W - right, py(reference), 0xD03030, 1, 6);
  for (size_t i = 1; i < steps.size(); ++i)
    if (std::isfinite(loss[i - 1]) && std::isfinite(loss[i]))
      c.line(px(double(steps[i - 1])), py(loss[i - 1]), px(double(steps[i])), py(loss[i]), 0x1F5FBF, 2);
  if (steps.size() == 1) c.box(px(double(steps[0])), py(loss[0]), 2, 0x1F5FBF);
  for (size_t i = 0; i < val.size(); ++i) {
    if (!std::isfinite(val[i])) continue;
    if (i > 0 && std::isfinite(val[i - 1]))
      c.line(px(double(valSteps[i - 1])), py(val[i - 1]), px(double(valSteps[i])), py(val[i]), 0xF08020, 1);
    c.box(px(double(valSteps[i])), py(val[i]), 3, 0xF08020);
  }
  return c.writePng(path, err);
}

}  // namespace plot
}  // namespace train
}  // namespace braid
