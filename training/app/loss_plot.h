// A loss plot written as a PNG without any plotting library (braid-train's --plot): the
// training loss per step (blue line), the validation loss (orange squares) and a
// reference loss (the unigram baseline, dashed red), on axes with numbered ticks. The
// PNG is 8-bit RGB, its zlib stream made of "stored" (uncompressed) deflate blocks: a
// valid file any viewer opens, a few hundred KiB, no zlib needed. Header-only: the
// training/app/ folder builds one program per .cc file.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
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

  /// Writes the canvas as a PNG; false (and *err) on an I/O error.
  bool writePng(const std::string& path, std::string* err) const {
    std::vector<uint8_t> raw;  // filter byte 0 + RGB per row
    raw.reserve(size_t(h_) * (size_t(w_) * 3 + 1));
    for (int y = 0; y < h_; ++y) {
      raw.push_back(0);
      raw.insert(raw.end(), px_.begin() + ptrdiff_t(size_t(y) * size_t(w_) * 3),
                 px_.begin() + ptrdiff_t(size_t(y + 1) * size_t(w_) * 3));
    }
    std::vector<uint8_t> z = {0x78, 0x01};  // zlib header: deflate, no preset dictionary
    for (size_t at = 0; at < raw.size() || at == 0;) {
      const size_t n = std::min<size_t>(65535, raw.size() - at);
      const bool last = at + n >= raw.size();
      z.push_back(last ? 1 : 0);  // BFINAL, BTYPE 00 (stored)
      z.push_back(uint8_t(n));
      z.push_back(uint8_t(n >> 8));
      z.push_back(uint8_t(~n));
      z.push_back(uint8_t(~n >> 8));
      z.insert(z.end(), raw.begin() + ptrdiff_t(at), raw.begin() + ptrdiff_t(at + n));
      at += n;
      if (last) break;
    }
    uint32_t a = 1, b = 0;  // Adler-32 of the uncompressed data
    for (uint8_t c : raw) {
      a = (a + c) % 65521;
      b = (b + a) % 65521;
    }
    put32(z, (b << 16) | a);
    std::vector<uint8_t> ihdr;
    put32(ihdr, uint32_t(w_));
    put32(ihdr, uint32_t(h_));
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter, no interlace
    std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    chunk(png, "IHDR", ihdr);
    chunk(png, "IDAT", z);
    chunk(png, "IEND", {});
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
    if (!f) {
      if (err) *err = "cannot write " + path;
      return false;
    }
    return true;
  }

 private:
  static void put32(std::vector<uint8_t>& v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
  }
  static uint32_t crc(const uint8_t* p, size_t n, uint32_t c) {
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c;
  }
  static void chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
    put32(png, uint32_t(data.size()));
    const size_t start = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data.begin(), data.end());
    put32(png, crc(png.data() + start, png.size() - start, 0xFFFFFFFFu) ^ 0xFFFFFFFFu);
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
  const double xs = tickStep(x1 - x0, 8);
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
