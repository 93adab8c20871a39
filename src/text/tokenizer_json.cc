#include "text/tokenizer_json.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tailcut {
namespace {

using json = nlohmann::json;

// Builds "tokenizer file '<source>': <what>" errors.
class Errors {
 public:
  explicit Errors(const std::string& source) : prefix_("tokenizer file '" + source + "': ") {}
  Status Invalid(const std::string& what) const { return Status::InvalidArgument(prefix_ + what); }
  // "<what> is not supported (supported: <supported>)": says what to change the file to.
  Status Unsupported(const std::string& what, const std::string& supported = "") const {
    return Status::InvalidArgument(prefix_ + what + " is not supported" +
                                   (supported.empty() ? "" : " (supported: " + supported + ")"));
  }

 private:
  std::string prefix_;
};

std::string TypeOf(const json& section) {
  if (!section.is_object()) return "";
  const auto it = section.find("type");
  return it != section.end() && it->is_string() ? it->get<std::string>() : "";
}

// Reads an optional boolean field; false return means the field has the wrong type.
bool GetBool(const json& obj, const char* key, bool* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

bool GetString(const json& obj, const char* key, std::string* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

Status ParseNormalizer(const json& root, const Errors& err, TokenizerSpec* spec) {
  const auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) {
    spec->normalizer = {false, false, false, false};  // No normalizer: text passes unchanged.
    return Status::Ok();
  }
  const std::string type = TypeOf(*it);
  if (type != "BertNormalizer") {
    return err.Unsupported("normalizer type '" + (type.empty() ? it->dump() : type) + "'",
                           "BertNormalizer");
  }
  BertNormalizerOptions& o = spec->normalizer;
  if (!GetBool(*it, "clean_text", &o.clean_text) ||
      !GetBool(*it, "handle_chinese_chars", &o.handle_chinese_chars) ||
      !GetBool(*it, "lowercase", &o.lowercase)) {
    return err.Invalid("BertNormalizer has a non-boolean option");
  }
  // strip_accents: null (or absent) follows lowercase, as in HF's BertNormalizer.
  o.strip_accents = o.lowercase;
  if (!GetBool(*it, "strip_accents", &o.strip_accents)) {
    return err.Invalid("BertNormalizer.strip_accents must be a boolean or null");
  }
  return Status::Ok();
}

Status ParsePreTokenizer(const json& root, const Errors& err) {
  const auto it = root.find("pre_tokenizer");
  if (it == root.end() || it->is_null()) {
    return err.Unsupported("a missing pre_tokenizer", "BertPreTokenizer");
  }
  const std::string type = TypeOf(*it);
  if (type != "BertPreTokenizer") {
    return err.Unsupported("pre_tokenizer type '" + (type.empty() ? it->dump() : type) + "'",
                           "BertPreTokenizer");
  }
  return Status::Ok();
}

Status ParseModel(const json& root, const Errors& err, TokenizerSpec* spec) {
  const auto it = root.find("model");
  if (it == root.end() || !it->is_object()) return err.Invalid("no \"model\" object");
  const json& model = *it;
  const std::string type = TypeOf(model);
  if (type != "WordPiece") {
    return err.Unsupported("model type '" + (type.empty() ? std::string("(none)") : type) + "'",
                           "WordPiece");
  }
  WordPieceConfig& c = spec->wordpiece;
  if (!GetString(model, "unk_token", &c.unk_token) ||
      !GetString(model, "continuing_subword_prefix", &c.continuing_subword_prefix)) {
    return err.Invalid("WordPiece unk_token / continuing_subword_prefix must be strings");
  }
  if (const auto m = model.find("max_input_chars_per_word"); m != model.end()) {
    if (!m->is_number_unsigned()) {
      return err.Invalid("WordPiece max_input_chars_per_word must be a non-negative integer");
    }
    c.max_input_chars_per_word = m->get<size_t>();
  }
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object() || vocab->empty()) {
    return err.Invalid("WordPiece model has no \"vocab\" object");
  }
  spec->vocab.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    // VocabMap stores 32-bit ids; real vocabularies are far smaller.
    if (!id.is_number_unsigned() || id.get<uint64_t>() > 0x7FFFFFFFu) {
      return err.Invalid("vocab id of '" + token + "' is not an integer in [0, 2^31)");
    }
    spec->vocab.emplace_back(token, id.get<int64_t>());
  }
  return Status::Ok();
}

Status ParseAddedTokens(const json& root, const Errors& err, TokenizerSpec* spec) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return err.Invalid("\"added_tokens\" is not an array");
  for (const json& t : *it) {
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        !t.contains("id") || !t["id"].is_number_unsigned()) {
      return err.Invalid("an added token lacks a string \"content\" or an integer \"id\"");
    }
    AddedToken token{t["content"].get<std::string>(), t["id"].get<int64_t>()};
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"}) {
      bool value = false;
      if (!GetBool(t, flag, &value)) {
        return err.Invalid("added token '" + token.content + "': " + flag + " is not a boolean");
      }
      if (value) {
        return err.Unsupported("added token '" + token.content + "' with " + flag + "=true");
      }
    }
    spec->added_tokens.push_back(std::move(token));
  }
  return Status::Ok();
}

// Resolves a token's id: added tokens first, then the vocab (HF's token_to_id order).
bool FindId(const TokenizerSpec& spec, const std::string& token, int64_t* id) {
  for (const auto& t : spec.added_tokens) {
    if (t.content == token) {
      *id = t.id;
      return true;
    }
  }
  for (const auto& [content, vid] : spec.vocab) {
    if (content == token) {
      *id = vid;
      return true;
    }
  }
  return false;
}

// Appends the ids of TemplateProcessing's special token `name` (its "special_tokens" entry).
Status AppendSpecialIds(const json& specials, const std::string& name, const Errors& err,
                        std::vector<int64_t>* out) {
  const auto sp = specials.find(name);
  if (sp == specials.end() || !sp->contains("ids") || !(*sp)["ids"].is_array()) {
    return err.Invalid("TemplateProcessing special token '" + name +
                       "' is not in \"special_tokens\"");
  }
  for (const json& id : (*sp)["ids"]) {
    if (!id.is_number_unsigned()) return err.Invalid("special token '" + name + "' has a bad id");
    out->push_back(id.get<int64_t>());
  }
  return Status::Ok();
}

// Reads a template piece's optional "type_id"; false means it has the wrong type.
bool GetTypeId(const json& piece, int64_t* out) {
  const auto it = piece.find("type_id");
  if (it == piece.end()) return true;
  if (!it->is_number_unsigned()) return false;
  *out = it->get<int64_t>();
  return true;
}

// TemplateProcessing's "pair" template, when it has the form specials* A specials* B
// specials*. Any other form (B first, a sequence twice, a piece of another kind) leaves
// spec->pair empty: single texts still encode exactly, pairs are refused when asked for. A
// special token the template does not define, or a type id that is not a number, is a broken
// file.
Status ParsePairTemplate(const json& pp, const json& specials, const Errors& err,
                         TokenizerSpec* spec) {
  const auto pair = pp.find("pair");
  if (pair == pp.end() || !pair->is_array()) return Status::Ok();
  PairTemplate t;
  int part = 0;  // 0: before A, 1: between A and B, 2: after B.
  for (const json& piece : *pair) {
    if (!piece.is_object()) return Status::Ok();
    if (const auto seq = piece.find("Sequence"); seq != piece.end()) {
      const std::string id = seq->is_object() ? seq->value("id", "") : "";
      int64_t* type = part == 0 && id == "A"   ? &t.a_type
                      : part == 1 && id == "B" ? &t.b_type
                                               : nullptr;
      if (type == nullptr) return Status::Ok();
      if (!GetTypeId(*seq, type))
        return err.Invalid("TemplateProcessing pair: sequence " + id + " has a bad type_id");
      ++part;
      continue;
    }
    const auto special = piece.find("SpecialToken");
    if (special == piece.end() || !special->is_object()) return Status::Ok();
    const std::string name = special->value("id", "");
    int64_t type = 0;
    if (!GetTypeId(*special, &type)) {
      return err.Invalid("TemplateProcessing pair: special token '" + name + "' has a bad type_id");
    }
    auto& ids = part == 0 ? t.before_a_ids : part == 1 ? t.between_ids : t.after_b_ids;
    auto& types = part == 0 ? t.before_a_types : part == 1 ? t.between_types : t.after_b_types;
    if (Status s = AppendSpecialIds(specials, name, err, &ids); !s.ok()) return s;
    types.resize(ids.size(), type);
  }
  if (part == 2) spec->pair = std::move(t);
  return Status::Ok();
}

Status ParseTemplate(const json& pp, const Errors& err, TokenizerSpec* spec) {
  const auto single = pp.find("single");
  if (single == pp.end() || !single->is_array()) {
    return err.Invalid("TemplateProcessing has no \"single\" template");
  }
  const json specials = pp.value("special_tokens", json::object());
  bool seen_sequence = false;
  for (const json& piece : *single) {
    if (piece.contains("Sequence")) {
      const std::string id = piece["Sequence"].value("id", "");
      if (id != "A" || seen_sequence) {
        return err.Unsupported("TemplateProcessing single template with sequence '" + id + "'");
      }
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) {
      return err.Unsupported("TemplateProcessing piece " + piece.dump());
    }
    const std::string name = piece["SpecialToken"].value("id", "");
    auto& target = seen_sequence ? spec->suffix_ids : spec->prefix_ids;
    if (Status s = AppendSpecialIds(specials, name, err, &target); !s.ok()) return s;
  }
  if (!seen_sequence) return err.Invalid("TemplateProcessing single template has no sequence A");
  return ParsePairTemplate(pp, specials, err, spec);
}

Status ParsePostProcessor(const json& root, const Errors& err, TokenizerSpec* spec) {
  const auto it = root.find("post_processor");
  if (it == root.end() || it->is_null()) return Status::Ok();  // HF then adds nothing.
  const std::string type = TypeOf(*it);
  if (type == "TemplateProcessing") return ParseTemplate(*it, err, spec);
  if (type == "BertProcessing") {
    // {"sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    for (const char* key : {"cls", "sep"}) {
      const auto p = it->find(key);
      if (p == it->end() || !p->is_array() || p->size() != 2 || !(*p)[1].is_number_unsigned()) {
        return err.Invalid(std::string("BertProcessing.") + key + " must be [token, id]");
      }
      (key[0] == 'c' ? spec->prefix_ids : spec->suffix_ids).push_back((*p)[1].get<int64_t>());
    }
    spec->pair = BertPairTemplate(spec->prefix_ids[0], spec->suffix_ids[0]);
    return Status::Ok();
  }
  return err.Unsupported("post_processor type '" + (type.empty() ? it->dump() : type) + "'",
                         "TemplateProcessing, BertProcessing");
}

void ResolvePadId(const json& root, TokenizerSpec* spec) {
  const auto padding = root.find("padding");
  if (padding != root.end() && padding->is_object()) {
    const auto id = padding->find("pad_id");
    if (id != padding->end() && id->is_number_unsigned()) {
      spec->pad_id = id->get<int64_t>();
      return;
    }
  }
  int64_t id = 0;
  spec->pad_id = FindId(*spec, "[PAD]", &id) ? id : 0;
}

}  // namespace

PairTemplate BertPairTemplate(int64_t cls_id, int64_t sep_id) {
  PairTemplate t;
  t.before_a_ids = {cls_id};
  t.before_a_types = {0};
  t.between_ids = {sep_id};
  t.between_types = {0};
  t.after_b_ids = {sep_id};
  t.after_b_types = {1};
  return t;
}

Result<TokenizerSpec> ParseTokenizerJson(std::string_view text, const std::string& source) {
  const Errors err(source);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return err.Invalid(std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) return err.Invalid("the top level is not a JSON object");

  TokenizerSpec spec;
  try {
    if (Status s = ParseNormalizer(root, err, &spec); !s.ok()) return s;
    if (Status s = ParsePreTokenizer(root, err); !s.ok()) return s;
    if (Status s = ParseModel(root, err, &spec); !s.ok()) return s;
    if (Status s = ParseAddedTokens(root, err, &spec); !s.ok()) return s;
    if (Status s = ParsePostProcessor(root, err, &spec); !s.ok()) return s;
  } catch (const json::exception& e) {
    // A field of an unexpected JSON type deep inside a section.
    return err.Invalid(std::string("unexpected structure: ") + e.what());
  }
  ResolvePadId(root, &spec);
  return spec;
}

Result<TokenizerSpec> ParseTokenizerJsonFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument("tokenizer file '" + path + "' is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound("cannot open tokenizer file '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::Internal("error reading tokenizer file '" + path + "'");
  return ParseTokenizerJson(buffer.str(), path);
}

}  // namespace tailcut
