// TextEmbeddingModel's batch runner against models that disagree with their model.yaml: the
// run fails with an error naming the shapes, never a read past the model's output.
//
// The ONNX files are written here with a few lines of protobuf encoding (the C++ tests have no
// ONNX library), so the test needs nothing but the default model's tokenizer.
#include "engine/text_embedding_model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model_config.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

// Protobuf wire format: varints and length-delimited fields are all an ONNX model needs.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string IntField(int field, uint64_t v) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(v);
}
std::string BytesField(int field, std::string_view bytes) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(bytes.size()) +
         std::string(bytes);
}

// onnx.proto: ValueInfoProto{name=1, type=2}, TypeProto{tensor_type=1},
// TypeProto.Tensor{elem_type=1, shape=2}, TensorShapeProto{dim=1}, Dimension{dim_param=2}.
std::string TensorValueInfo(const std::string& name, int elem_type,
                            const std::vector<std::string>& dims) {
  std::string shape;
  for (const auto& d : dims) shape += BytesField(1, BytesField(2, d));
  const std::string tensor = IntField(1, static_cast<uint64_t>(elem_type)) + BytesField(2, shape);
  return BytesField(1, name) + BytesField(2, BytesField(1, tensor));
}
// NodeProto{input=1, output=2, op_type=4, attribute=5}.
std::string Node(const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& output, const std::string& attributes = "") {
  std::string node;
  for (const auto& in : inputs) node += BytesField(1, in);
  return node + BytesField(2, output) + BytesField(4, op) + attributes;
}

constexpr int kFloat = 1;  // TensorProto.DataType
constexpr int kInt64 = 7;

// A per-token model whose width is the sequence length: input_ids, attention_mask [b, s] ->
// "hidden" [b, s, s] = ids[b, s] * mask[b, t]. Its hidden size is open in the graph (the
// loader must take model.yaml's dimensions) and matches it only for one sequence length.
std::string WidthIsSequenceModel() {
  // TensorProto{dims=1, data_type=2, int64_data=7 (packed), name=8}: the Unsqueeze axes.
  auto axes = [](const std::string& name, int64_t axis) {
    return BytesField(5, IntField(1, 1) + IntField(2, kInt64) +
                             BytesField(7, Varint(static_cast<uint64_t>(axis))) +
                             BytesField(8, name));
  };
  // AttributeProto{name=1, i=3, type=20 (INT=2)}.
  const std::string to_float = BytesField(5, BytesField(1, "to") + IntField(3, kFloat) +
                                                 IntField(20, 2));
  std::string graph;
  graph += BytesField(1, Node("Cast", {"input_ids"}, "ids_f", to_float));
  graph += BytesField(1, Node("Cast", {"attention_mask"}, "mask_f", to_float));
  graph += BytesField(1, Node("Unsqueeze", {"ids_f", "axis2"}, "ids_3d"));
  graph += BytesField(1, Node("Unsqueeze", {"mask_f", "axis1"}, "mask_3d"));
  graph += BytesField(1, Node("Mul", {"ids_3d", "mask_3d"}, "hidden"));
  graph += BytesField(2, "width_is_sequence");
  graph += axes("axis2", 2) + axes("axis1", 1);
  graph += BytesField(11, TensorValueInfo("input_ids", kInt64, {"batch", "sequence"}));
  graph += BytesField(11, TensorValueInfo("attention_mask", kInt64, {"batch", "sequence"}));
  graph += BytesField(12, TensorValueInfo("hidden", kFloat, {"batch", "sequence", "width"}));
  // ModelProto{ir_version=1, graph=7, opset_import=8 (OperatorSetIdProto{version=2})}.
  return IntField(1, 8) + BytesField(7, graph) + BytesField(8, IntField(2, 17));
}

ModelConfig ConfigFor(const std::string& onnx_bytes, int dimensions) {
  auto dir = testing::TempDir("width-is-sequence");
  const std::string path = (dir / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << onnx_bytes;
  auto config = LoadModelConfig(testing::ModelDir());  // For its tokenizer.
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  ModelConfig c = *config;
  c.name = "width-is-sequence";
  c.file_path = path;
  c.output = "hidden";
  c.pooling = Pooling::kMean;
  c.dimensions = dimensions;
  return c;
}

TEST(TextEmbeddingModelTest, OutputWiderOrNarrowerThanDimensionsIsAnErrorNotAnOverread) {
  // Warm-up runs [1, 8] first (width 8 = dimensions: fine), then [4, 16], whose 16 floats
  // per token are not the 8 model.yaml promises.
  auto wider = TextEmbeddingModel::Load(ConfigFor(WidthIsSequenceModel(), 8), {});
  ASSERT_FALSE(wider.ok());
  EXPECT_EQ(wider.status().code(), Status::Code::kInternal);
  const std::string& m = wider.status().message();
  EXPECT_NE(m.find("output 'hidden' has shape [4, 16, 16]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 16, 8]"), std::string::npos) << m;
  EXPECT_NE(m.find("dimensions"), std::string::npos) << m;

  // Narrower: 8 floats per token where 64 would be read (without the check, past the end).
  auto narrower = TextEmbeddingModel::Load(ConfigFor(WidthIsSequenceModel(), 64), {});
  ASSERT_FALSE(narrower.ok());
  EXPECT_NE(narrower.status().message().find("has shape [1, 8, 8]"), std::string::npos)
      << narrower.status().message();
}

}  // namespace
}  // namespace tailcut
