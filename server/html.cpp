// Escaping, the shared layout, times, links and charts (html.hpp).
#include "server/html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

namespace cplane::server {

namespace {

// The length of the well-formed UTF-8 sequence at text[at], 0 if none.
std::size_t utf8_length(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char c = byte(at);
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (at + n > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  }
  return n;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    switch (c) {
      case '&': out += "&amp;"; ++at; continue;
      case '<': out += "&lt;"; ++at; continue;
      case '>': out += "&gt;"; ++at; continue;
      case '"': out += "&quot;"; ++at; continue;
      case '\'': out += "&#39;"; ++at; continue;
      default: break;
    }
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7F) {
      out += kReplacement;
      ++at;
      continue;
    }
    const std::size_t n = utf8_length(text, at);
    if (n == 0) {
      out += kReplacement;
      ++at;
      continue;
    }
    // C1 controls (U+0080..U+009F) are shown as U+FFFD too.
    if (n == 2 && u == 0xC2 && static_cast<unsigned char>(text[at + 1]) < 0xA0) {
      out += kReplacement;
    } else {
      out.append(text.substr(at, n));
    }
    at += n;
  }
  return out;
}

std::string url_part(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string item_link(std::string_view item_id) {
  return fmt::format("<a class=\"id\" href=\"/items/{}\">{}</a>", url_part(item_id), escape(item_id));
}

std::string project_link(std::string_view project_id) {
  return fmt::format("<a href=\"/items?project={}\">{}</a>", url_part(project_id),
                     escape(project_id));
}

std::string time_text(Micros at) {
  if (at == 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(at / 1'000'000);
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return std::to_string(at);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string duration_text(Micros micros) {
  const bool negative = micros < 0;
  const Micros m = negative ? -micros : micros;
  std::string text;
  if (m < 1'000'000) {
    text = fmt::format("{}ms", m / 1000);
  } else if (m < 60'000'000) {
    text = fmt::format("{:.1f}s", static_cast<double>(m) / 1e6);
  } else if (m < 3600'000'000LL) {
    text = fmt::format("{}m {}s", m / 60'000'000, (m / 1'000'000) % 60);
  } else if (m < 86400'000'000LL) {
    text = fmt::format("{}h {}m", m / 3600'000'000LL, (m / 60'000'000) % 60);
  } else {
    text = fmt::format("{}d {}h", m / 86400'000'000LL, (m / 3600'000'000LL) % 24);
  }
  return negative ? "-" + text : text;
}

Response page(std::string_view title, std::string_view active, const std::string& body) {
  static const std::pair<const char*, const char*> kNav[] = {
      {"/", "Overview"}, {"/items", "Items"}, {"/sessions", "Sessions"},
      {"/projects", "Projects"}, {"/verify", "Verify"}, {"/metrics", "Metrics"}};
  std::string nav;
  for (const auto& [href, name] : kNav) {
    nav += fmt::format("<a href=\"{}\"{}>{}</a>", href,
                       std::string_view(name) == active ? " class=\"active\"" : "", name);
  }
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{} · cplane</title><link rel=\"stylesheet\" href=\"/static/console.css\">"
      "<script src=\"/static/console.js\" defer></script></head>\n<body>"
      "<header><span class=\"brand\">cplane</span><nav>{}</nav>"
      "<form id=\"token-form\" class=\"token\"><input id=\"token\" type=\"password\" "
      "autocomplete=\"off\" placeholder=\"bearer token (kept in this tab only)\" "
      "aria-label=\"bearer token\"><button type=\"submit\">Use token</button>"
      "<span id=\"token-state\"></span></form></header>\n"
      "<main><h1>{}</h1><div id=\"action-result\" role=\"status\"></div>\n{}</main></body></html>\n",
      escape(title), nav, escape(title), body);
  return {200, "text/html; charset=utf-8", std::move(html), {}};
}

std::string bar_chart(std::string_view label, const std::vector<Series>& series,
                      std::string_view unit) {
  constexpr int kWidth = 720, kHeight = 140, kLeft = 56, kBottom = 18;
  std::size_t n = 0;
  double top = 0;
  for (const auto& s : series) {
    n = std::max(n, s.values.size());
    for (const double v : s.values) top = std::max(top, v);
  }
  if (top <= 0) top = 1;
  const double plot_w = kWidth - kLeft - 4, plot_h = kHeight - kBottom - 8;
  const double slot = n > 0 ? plot_w / static_cast<double>(n) : plot_w;
  const double bar = std::max(1.0, slot / static_cast<double>(std::max<std::size_t>(series.size(), 1)) - 1);
  std::string svg = fmt::format(
      "<figure class=\"chart\"><figcaption>{}</figcaption>"
      "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">"
      "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>"
      "<text class=\"tick\" x=\"{}\" y=\"14\" text-anchor=\"end\">{}</text>"
      "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>",
      escape(label), kWidth, kHeight, kWidth, kHeight, escape(label), kLeft, kHeight - kBottom,
      kWidth - 4, kHeight - kBottom, kLeft - 4, escape(fmt::format("{:.3g}{}", top, unit)), kLeft - 4,
      kHeight - kBottom);
  for (std::size_t s = 0; s < series.size(); ++s) {
    for (std::size_t i = 0; i < series[s].values.size(); ++i) {
      const double v = series[s].values[i];
      if (v <= 0 || !std::isfinite(v)) continue;
      const double h = std::max(1.0, plot_h * v / top);
      svg += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                         "height=\"{:.1f}\"><title>{}</title></rect>",
                         escape(series[s].css_class),
                         kLeft + 1 + slot * static_cast<double>(i) + bar * static_cast<double>(s),
                         kHeight - kBottom - h, bar, h,
                         escape(fmt::format("{}: {:.3g}{}", series[s].name, v, unit)));
    }
  }
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\">-{}m</text>"
                     "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">now</text></svg>",
                     kLeft, kHeight - 4, n, kWidth - 4, kHeight - 4);
  std::string legend;
  for (const auto& s : series) {
    legend += fmt::format("<span class=\"key {}\">{}</span>", escape(s.css_class), escape(s.name));
  }
  return svg + "<div class=\"legend\">" + legend + "</div></figure>\n";
}

std::string action_form(std::string_view action_path, std::string_view button,
                        const std::vector<FormField>& hidden, std::string_view text_field,
                        std::string_view placeholder) {
  std::string form = fmt::format("<form class=\"action\" method=\"post\" action=\"{}\">",
                                 escape(action_path));
  for (const auto& f : hidden) {
    form += fmt::format("<input type=\"hidden\" name=\"{}\" value=\"{}\">", escape(f.name),
                        escape(f.value));
  }
  if (!text_field.empty()) {
    form += fmt::format("<input type=\"text\" name=\"{}\" placeholder=\"{}\">", escape(text_field),
                        escape(placeholder));
  }
  return form + fmt::format("<button type=\"submit\">{}</button></form>", escape(button));
}

}  // namespace cplane::server
