#include "flamegraph.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "report.h"  // human_ns

namespace parcagpu::trace {
namespace {

struct Node {
  std::string name;
  FlameFrame::Kind kind = FlameFrame::Kind::Cpu;
  uint64_t value = 0;
  std::map<std::pair<std::string, int>, std::unique_ptr<Node>> children;  // sorted by name
};

std::string xml_escape(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        // Control characters are not allowed in XML 1.0.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

uint32_t hash_name(const std::string &s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// flamegraph.pl's palettes, by kind: warm for CPU frames, aqua for inlined ones, green for GPU
// kernels, grey for pseudo frames. The shade is a hash of the name: stable between runs.
std::string color(const Node &n) {
  const uint32_t h = hash_name(n.name);
  const double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0, v3 = ((h >> 16) & 0xff) / 255.0;
  int r, g, b;
  switch (n.kind) {
    case FlameFrame::Kind::Gpu:
      r = static_cast<int>(50 + 60 * v3), g = static_cast<int>(180 + 55 * v1), b = static_cast<int>(50 + 60 * v2);
      break;
    case FlameFrame::Kind::Inlined:
      r = static_cast<int>(50 + 60 * v3), g = static_cast<int>(165 + 55 * v1), b = static_cast<int>(165 + 55 * v1);
      break;
    case FlameFrame::Kind::Pseudo:
      r = g = b = static_cast<int>(180 + 40 * v1);
      break;
    default:
      r = static_cast<int>(205 + 50 * v3), g = static_cast<int>(230 * v1), b = static_cast<int>(55 * v2);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", r, g, b);
  return buf;
}

int depth_of(const Node &n) {
  int d = 0;
  for (const auto &[k, c] : n.children) d = std::max(d, depth_of(*c));
  return d + 1;
}

struct Layout {
  const FlameGraphOptions &o;
  double scale;  // px per ns
  uint64_t total;
  int max_depth;
  int top;       // y of the deepest row
  std::string out;
  uint64_t omitted = 0;

  void frame(const Node &n, double x, int depth) {
    const double w = n.value * scale;
    if (w < o.min_width_px) {
      ++omitted;
      return;
    }
    const int y = top + (max_depth - 1 - depth) * o.frame_height;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f%%", total ? 100.0 * n.value / total : 0.0);
    const std::string name = xml_escape(n.name);
    out += "<g class=\"frame\" data-name=\"" + name + "\" data-kind=\"" + kind_name(n.kind) +
           "\" data-value=\"" + std::to_string(n.value) + "\" data-depth=\"" + std::to_string(depth) + "\">";
    out += "<title>" + name + " (" + human_ns(n.value) + ", " + pct + ")</title>";
    char rect[256];
    std::snprintf(rect, sizeof rect,
                  "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\" ry=\"2\"/>",
                  x, y, w, o.frame_height - 1, color(n).c_str());
    out += rect;
    // Verdana 12px averages ~7 px per character: show what fits, ".." when cut.
    const int fit = static_cast<int>((w - 6) / 7.0);
    if (fit >= 3) {
      std::string label = n.name;
      if (static_cast<int>(label.size()) > fit) label = label.substr(0, fit - 2) + "..";
      char text[128];
      std::snprintf(text, sizeof text, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + o.frame_height * 0.75);
      out += text + xml_escape(label) + "</text>";
    }
    out += "</g>\n";
    double cx = x;
    for (const auto &[k, c] : n.children) {
      frame(*c, cx, depth + 1);
      cx += c->value * scale;
    }
  }
};

}  // namespace

const char *kind_name(FlameFrame::Kind k) {
  switch (k) {
    case FlameFrame::Kind::Gpu: return "gpu";
    case FlameFrame::Kind::Inlined: return "inlined";
    case FlameFrame::Kind::Pseudo: return "pseudo";
    default: return "cpu";
  }
}

std::string folded_text(const std::vector<FoldedStack> &stacks) {
  // One line per key: stacks that come out the same (';' and newlines replaced, or frames that
  // print alike) are added up in the first one's place, as flamegraph.pl would.
  std::vector<std::pair<std::string, uint64_t>> lines;
  std::unordered_map<std::string, size_t> index;
  for (const FoldedStack &s : stacks) {
    std::string key;
    for (size_t i = 0; i < s.frames.size(); ++i) {
      if (i) key += ';';
      for (char c : s.frames[i].name) key += c == ';' ? ':' : (c == '\n' ? ' ' : c);
    }
    auto [it, fresh] = index.try_emplace(key, lines.size());
    if (fresh)
      lines.emplace_back(std::move(key), s.value);
    else
      lines[it->second].second += s.value;
  }
  std::string out;
  for (const auto &[key, value] : lines) out += key + ' ' + std::to_string(value) + '\n';
  return out;
}

std::string flamegraph_svg(const std::vector<FoldedStack> &stacks, const FlameGraphOptions &o) {
  Node root;
  root.name = "all";
  root.kind = FlameFrame::Kind::Pseudo;
  for (const FoldedStack &s : stacks) {
    root.value += s.value;
    Node *n = &root;
    for (const FlameFrame &f : s.frames) {
      auto &child = n->children[{f.name, static_cast<int>(f.kind)}];
      if (!child) {
        child = std::make_unique<Node>();
        child->name = f.name;
        child->kind = f.kind;
      }
      child->value += s.value;
      n = child.get();
    }
  }
  const int depth = depth_of(root);
  const int pad_top = 52, pad_bottom = 30, pad_side = 10;
  const int height = pad_top + depth * o.frame_height + pad_bottom;
  const double graph_w = o.width - 2 * pad_side;
  Layout l{o, root.value ? graph_w / static_cast<double>(root.value) : 0, root.value, depth, pad_top, {}};
  char head[1024];
  std::snprintf(head, sizeof head,
                "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "xmlns=\"http://www.w3.org/2000/svg\" data-total-ns=\"%" PRIu64 "\">\n"
                "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
                "<stop stop-color=\"#eeeeee\" offset=\"5%%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%%\"/>"
                "</linearGradient></defs>\n"
                "<style>text { font-family: Verdana, 'DejaVu Sans', sans-serif; font-size: 12px; fill: #000; }"
                " .title { font-size: 17px; text-anchor: middle; } .sub { fill: #555; text-anchor: middle; }"
                " .frame:hover rect { stroke: #000; stroke-width: 0.5; }</style>\n"
                "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#background)\"/>\n",
                o.width, height, o.width, height, root.value, o.width, height);
  l.out = head;
  l.out += "<text class=\"title\" x=\"" + std::to_string(o.width / 2) + "\" y=\"24\">" +
           xml_escape(o.title) + "</text>\n";
  l.out += "<text class=\"sub\" x=\"" + std::to_string(o.width / 2) + "\" y=\"42\">" +
           xml_escape(o.subtitle) + "</text>\n";
  if (root.value == 0) {
    l.out += "<text class=\"sub\" x=\"" + std::to_string(o.width / 2) + "\" y=\"" +
             std::to_string(pad_top + 20) + "\">no GPU time recorded</text>\n";
  } else {
    l.frame(root, pad_side, 0);
  }
  l.out += "<text x=\"" + std::to_string(pad_side) + "\" y=\"" + std::to_string(height - 10) +
           "\">width = GPU time; hover a frame for its time. green: GPU kernels, warm: CPU frames "
           "(launch stack, root at the bottom), aqua: inlined calls, grey: no stack</text>\n";
  l.out += "</svg>\n";
  return l.out;
}

}  // namespace parcagpu::trace
