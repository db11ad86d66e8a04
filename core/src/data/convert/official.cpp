// The official layouts of the metric-learning benchmarks. Each follows the usual protocol
// (and OML's converters): CUB-200-2011 and CARS196 use the first half of the classes for
// training and the second half for validation; SOP and InShop use their own split files.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "../../common/raw_io.h"
#include "convert_common.h"
#include "mat_file.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/csv.h"

namespace oml::data::convert {

namespace {

// Copies the listed images (paths relative to `root`; the output keeps the dataset's own
// layout) and commits.
ConvertReport finish(OutputFolder& out, std::vector<Row>& rows, const fs::path& root, int64_t limit) {
  apply_limit(rows, limit);
  std::vector<std::pair<fs::path, std::string>> files;
  for (const auto& row : rows) files.emplace_back(root / row.path, row.path);
  out.copy_files(files);
  return out.commit(rows);
}

BBox checked_box(const fs::path& file, const TextLine& line, double x1, double y1, double x2, double y2) {
  const BBox box{static_cast<int64_t>(std::lround(x1)), static_cast<int64_t>(std::lround(x2)),
                 static_cast<int64_t>(std::lround(y1)), static_cast<int64_t>(std::lround(y2))};
  OML_CHECK(box.x1 >= 0 && box.y1 >= 0 && box.x1 < box.x2 && box.y1 < box.y2, DataError, file.string(), ":",
            line.line, ": the bounding box (x_1=", box.x1, ", x_2=", box.x2, ", y_1=", box.y1,
            ", y_2=", box.y2, ") is empty or negative");
  return box;
}

// "id value..." files of CUB, keyed by image id.
std::map<int64_t, TextLine> by_id(const fs::path& file, std::size_t fields, const std::string& format) {
  std::map<int64_t, TextLine> out;
  for (auto& line : read_text_table(file, 0, "CUB-200-2011's " + file.filename().string())) {
    expect_tokens(file, line, fields, format);
    const int64_t id = token_int(file, line, 0, "image id");
    out.emplace(id, std::move(line));
  }
  return out;
}

}  // namespace

// CUB_200_2011/{images.txt, image_class_labels.txt, bounding_boxes.txt, images/}; classes 1-100
// train, 101-200 validation; boxes "x y width height".
ConvertReport convert_cub(const ConvertOptions& options) {
  const fs::path root = locate_root(options.src, "images.txt", "CUB_200_2011");
  const fs::path images_file = root / "images.txt", labels_file = root / "image_class_labels.txt",
                 boxes_file = root / "bounding_boxes.txt";
  const auto labels = by_id(labels_file, 2, "<image_id> <class_id>");
  const auto boxes = by_id(boxes_file, 5, "<image_id> <x> <y> <width> <height>");
  OutputFolder out(options, root);
  std::vector<Row> rows;
  for (const auto& [id, line] : by_id(images_file, 2, "<image_id> <image_name>")) {
    const auto label = labels.find(id);
    OML_CHECK(label != labels.end(), DataError, images_file.string(), ":", line.line, ": image id ", id,
              " has no class in ", labels_file.string());
    const auto box = boxes.find(id);
    OML_CHECK(box != boxes.end(), DataError, images_file.string(), ":", line.line, ": image id ", id,
              " has no bounding box in ", boxes_file.string());
    Row row;
    row.label = token_int(labels_file, label->second, 1, "class_id");
    row.path = "images/" + checked_image_path(images_file, line.line, line.tokens[1]);
    row.train = row.label <= 100;
    row.is_query = row.is_gallery = !row.train;
    const double x = token_double(boxes_file, box->second, 1, "x"),
                 y = token_double(boxes_file, box->second, 2, "y");
    const double w = token_double(boxes_file, box->second, 3, "width"),
                 h = token_double(boxes_file, box->second, 4, "height");
    row.bbox = checked_box(boxes_file, box->second, x, y, x + w, y + h);
    rows.push_back(std::move(row));
  }
  return finish(out, rows, root, options.limit);
}

// Stanford_Online_Products/{Ebay_train.txt, Ebay_test.txt, <category>_final/...}: header
// "image_id class_id super_class_id path"; the category is the folder name without "_final".
ConvertReport convert_sop(const ConvertOptions& options) {
  const fs::path root = locate_root(options.src, "Ebay_train.txt", "Stanford_Online_Products");
  OutputFolder out(options, root);
  std::vector<Row> rows;
  for (const bool train : {true, false}) {
    const fs::path file = root / (train ? "Ebay_train.txt" : "Ebay_test.txt");
    for (const auto& line : read_text_table(file, 1, "SOP's " + file.filename().string())) {
      expect_tokens(file, line, 4, "image_id class_id super_class_id path");
      Row row;
      row.label = token_int(file, line, 1, "class_id");
      row.path = checked_image_path(file, line.line, line.tokens[3]);
      row.train = train;
      row.is_query = row.is_gallery = !train;
      std::string category = fs::path(row.path).parent_path().filename().string();
      if (ends_with(category, "_final")) category.resize(category.size() - 6);
      row.category = category;
      rows.push_back(std::move(row));
    }
  }
  return finish(out, rows, root, options.limit);
}

namespace {

// One CARS196 annotation: relative_im_path, bbox_x1, bbox_y1, bbox_x2, bbox_y2, class.
struct CarsAnnotation {
  int64_t line = 0;  ///< CSV line, or the struct element's 1-based number in the MAT file
  std::string path;
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int64_t label = 0;
};

// cars_annos.mat: the struct array `annotations` with one element per image.
std::vector<CarsAnnotation> read_cars_mat(const fs::path& file) {
  const auto variables = read_mat_file(file);
  const auto found = variables.find("annotations");
  OML_CHECK(found != variables.end(), DataError, file.string(), " has no variable 'annotations'");
  const MatValue& annotations = found->second;
  const std::string name = file.string();
  std::vector<CarsAnnotation> out;
  for (int64_t i = 0; i < annotations.count(); ++i) {
    const std::string what = name + ": annotations(" + std::to_string(i + 1) + ")";
    CarsAnnotation a;
    a.line = i + 1;
    a.path = checked_image_path(file, i + 1, annotations.field(i, "relative_im_path", name).text);
    a.x1 = annotations.field(i, "bbox_x1", name).scalar(what + ".bbox_x1");
    a.y1 = annotations.field(i, "bbox_y1", name).scalar(what + ".bbox_y1");
    a.x2 = annotations.field(i, "bbox_x2", name).scalar(what + ".bbox_x2");
    a.y2 = annotations.field(i, "bbox_y2", name).scalar(what + ".bbox_y2");
    a.label = static_cast<int64_t>(annotations.field(i, "class", name).scalar(what + ".class"));
    out.push_back(std::move(a));
  }
  return out;
}

// cars_annos.csv: the same annotations exported to CSV (header names as the MAT fields).
std::vector<CarsAnnotation> read_cars_csv(const fs::path& file) {
  const std::optional<std::string> text = oml::detail::read_file(file.string());
  OML_CHECK(text.has_value(), DataError, "cannot open ", file.string());
  const auto records = parse_csv(*text, file.string());
  OML_CHECK(!records.empty(), DataError, file.string(), " is empty");
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < records[0].fields.size(); ++i) column[trim(records[0].fields[i])] = i;
  for (const char* name : {"relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class"}) {
    OML_CHECK(column.count(name), DataError, file.string(), ":1: missing column '", name,
              "'; expected relative_im_path,bbox_x1,bbox_y1,bbox_x2,bbox_y2,class");
  }
  std::vector<CarsAnnotation> out;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& record = records[r];
    OML_CHECK(record.fields.size() == records[0].fields.size(), DataError, file.string(), ":", record.line,
              ": expected ", records[0].fields.size(), " fields, got ", record.fields.size());
    TextLine line{record.line, {}};
    for (const char* name : {"class", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2"}) {
      line.tokens.push_back(trim(record.fields[column[name]]));
    }
    CarsAnnotation a;
    a.line = record.line;
    a.path = checked_image_path(file, record.line, trim(record.fields[column["relative_im_path"]]));
    a.label = token_int(file, line, 0, "class");
    a.x1 = token_double(file, line, 1, "bbox_x1");
    a.y1 = token_double(file, line, 2, "bbox_y1");
    a.x2 = token_double(file, line, 3, "bbox_x2");
    a.y2 = token_double(file, line, 4, "bbox_y2");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

// CARS196: cars_annos.mat (or its CSV export cars_annos.csv) next to car_ims/. Classes 1-98
// train, 99-196 validation; boxes from the annotations.
ConvertReport convert_cars(const ConvertOptions& options) {
  std::error_code ec;
  const bool has_mat = fs::exists(options.src / "cars_annos.mat", ec);
  const fs::path root = locate_root(options.src, has_mat ? "cars_annos.mat" : "cars_annos.csv", "");
  const fs::path file = root / (has_mat ? "cars_annos.mat" : "cars_annos.csv");
  const auto annotations = has_mat ? read_cars_mat(file) : read_cars_csv(file);
  OutputFolder out(options, root);
  std::vector<Row> rows;
  for (const auto& a : annotations) {
    Row row;
    row.label = a.label;
    row.path = a.path;
    row.train = row.label <= 98;
    row.is_query = row.is_gallery = !row.train;
    row.bbox = checked_box(file, TextLine{a.line, {}}, a.x1, a.y1, a.x2, a.y2);
    rows.push_back(std::move(row));
  }
  return finish(out, rows, root, options.limit);
}

// DeepFashion In-shop: list_eval_partition.txt ("image_name item_id evaluation_status" with
// train/query/gallery) and list_bbox_inshop.txt ("image_name clothes_type pose_type x_1 y_1 x_2
// y_2"), both after a count line and a header line. Label: the item id's number; category:
// gender and clothes folder ("WOMEN_Dresses").
ConvertReport convert_inshop(const ConvertOptions& options) {
  const fs::path root = locate_root(options.src, "list_eval_partition.txt", "");
  const fs::path partition = root / "list_eval_partition.txt", boxes_file = root / "list_bbox_inshop.txt";
  std::map<std::string, TextLine> boxes;
  for (auto& line : read_text_table(boxes_file, 2, "InShop's list_bbox_inshop.txt")) {
    expect_tokens(boxes_file, line, 7, "image_name clothes_type pose_type x_1 y_1 x_2 y_2");
    boxes.emplace(line.tokens[0], std::move(line));
  }
  OutputFolder out(options, root);
  std::vector<Row> rows;
  for (const auto& line : read_text_table(partition, 2, "InShop's list_eval_partition.txt")) {
    expect_tokens(partition, line, 3, "image_name item_id evaluation_status");
    const std::string& item = line.tokens[1];
    const std::string& status = line.tokens[2];
    OML_CHECK(starts_with(item, "id_"), DataError, partition.string(), ":", line.line, ": item id '", item,
              "' does not look like id_<number>");
    TextLine id_line{line.line, {item.substr(3)}};
    Row row;
    row.label = token_int(partition, id_line, 0, "item_id");
    row.path = checked_image_path(partition, line.line, line.tokens[0]);
    OML_CHECK(status == "train" || status == "query" || status == "gallery", DataError, partition.string(),
              ":", line.line, ": evaluation_status '", status, "', expected train, query or gallery");
    row.train = status == "train";
    row.is_query = status == "query";
    row.is_gallery = status == "gallery";
    const auto parts = split(fs::path(row.path).generic_string(), '/');
    if (parts.size() >= 4) row.category = parts[1] + "_" + parts[2];  // img/WOMEN/Dresses/id_x/file.jpg
    const auto box = boxes.find(row.path);
    if (box != boxes.end()) {
      const TextLine& b = box->second;
      row.bbox = checked_box(boxes_file, b, token_double(boxes_file, b, 3, "x_1"),
                             token_double(boxes_file, b, 4, "y_1"), token_double(boxes_file, b, 5, "x_2"),
                             token_double(boxes_file, b, 6, "y_2"));
    }
    rows.push_back(std::move(row));
  }
  return finish(out, rows, root, options.limit);
}

}  // namespace oml::data::convert
