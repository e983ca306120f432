// The register form of the schema pages: the schema box's placeholder follows the chosen
// format (Avro or JSON Schema JSON, or .proto text), from the select's data-placeholders.
const select = document.querySelector("#id_schema_type[data-placeholders]");
const schema = document.querySelector("#id_schema");
if (select && schema) {
  const placeholders = JSON.parse(select.dataset.placeholders);
  select.addEventListener("change", () => {
    schema.placeholder = placeholders[select.value] || "";
  });
}
