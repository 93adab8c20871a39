#include "config/yaml_source.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "config/setting_names.h"
#include "config/settings.h"
#include "config/suggestions.h"
#include "config/value_parsing.h"

namespace tailcut::config_internal {
namespace {

std::string NodeKindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "a scalar";
  }
}

class FileApplier {
 public:
  FileApplier(std::string path, ServerConfig* config, std::vector<std::string>* errors)
      : path_(std::move(path)), config_(config), errors_(errors) {}

  void Apply() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      errors_->push_back("cannot read config file " + path_ + ": " + std::strerror(errno));
      return;
    }
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node root;
    try {
      root = YAML::Load(text.str());
    } catch (const YAML::ParserException& e) {
      errors_->push_back(Where(e.mark) + "invalid YAML: " + e.msg);
      return;
    }
    if (root.IsNull()) return;  // An empty file (or only comments) sets nothing.
    if (!root.IsMap()) {
      errors_->push_back(Where(root.Mark()) + "the top level must be a map of sections, not " +
                         NodeKindName(root));
      return;
    }
    Walk(root, "");
  }

 private:
  // "server.port" -> "server: {port: ...}".
  static std::string Nested(std::string_view path) {
    std::string out;
    size_t depth = 0;
    size_t start = 0;
    for (size_t dot = path.find('.'); dot != std::string_view::npos;
         start = dot + 1, dot = path.find('.', start), ++depth) {
      out += std::string(path.substr(start, dot - start)) + ": {";
    }
    out += std::string(path.substr(start)) + ": ...";
    return out + std::string(depth, '}');
  }

  std::string Where(const YAML::Mark& mark) const {
    if (mark.is_null()) return path_ + ": ";
    return path_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
           ": ";
  }

  void Walk(const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (const auto& entry : map) {
      // Copies (cheap handles): the iterator's pair is a temporary.
      const YAML::Node key_node = entry.first;
      const YAML::Node value = entry.second;
      if (!key_node.IsScalar()) {
        errors_->push_back(Where(key_node.Mark()) + "keys must be plain names, not " +
                           NodeKindName(key_node));
        continue;
      }
      const std::string path =
          prefix.empty() ? key_node.Scalar() : prefix + "." + key_node.Scalar();
      // yaml-cpp keeps both copies of a repeated key; which one wins would be an accident.
      if (!seen.insert(key_node.Scalar()).second) {
        errors_->push_back(Where(key_node.Mark()) + path + " is given twice");
        continue;
      }
      if (key_node.Scalar().find('.') != std::string::npos) {
        // One spelling per setting: a flat "server.port" beside a nested one would be two
        // values for one key.
        errors_->push_back(Where(key_node.Mark()) + "unknown key " + path +
                           " (keys are not dotted in files: write it " + Nested(path) + ")");
      } else if (const Setting* s = FindSetting(path)) {
        ApplyLeaf(*s, key_node, value);
      } else if (IsSection(path)) {
        if (value.IsNull()) continue;  // "server:" with everything below commented out.
        if (!value.IsMap()) {
          errors_->push_back(Where(value.Mark()) + path + " must be a map of settings, not " +
                             NodeKindName(value));
          continue;
        }
        Walk(value, path);
      } else {
        errors_->push_back(Where(key_node.Mark()) + "unknown key " + path +
                           Suggestion(path, AfterFirst(path, '.'), KeyCandidates()));
      }
    }
  }

  void ApplyLeaf(const Setting& s, const YAML::Node& key_node, const YAML::Node& value) {
    if (value.IsNull()) {
      errors_->push_back(Where(key_node.Mark()) + s.key +
                         " has no value (remove the key to keep the default)");
      return;
    }
    if (!value.IsScalar()) {
      errors_->push_back(Where(value.Mark()) + s.key + " must be " + KindName(s) + ", not " +
                         NodeKindName(value));
      return;
    }
    std::string problem;
    const auto parsed = ParseValue(s, value.Scalar(), &problem);
    if (!parsed) {
      errors_->push_back(Where(value.Mark()) + s.key + "=" + ShowValue(value.Scalar()) + " " +
                         problem);
      return;
    }
    s.set(*config_, *parsed);
  }

  const std::string path_;
  ServerConfig* const config_;
  std::vector<std::string>* const errors_;
};

}  // namespace

void ApplyConfigFile(const std::string& path, ServerConfig* config,
                     std::vector<std::string>* errors) {
  FileApplier(path, config, errors).Apply();
}

}  // namespace tailcut::config_internal
