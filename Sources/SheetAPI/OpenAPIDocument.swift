/// The API's OpenAPI description, `openapi.yaml` at the repository root, embedded at build time
/// (through the symlink in Resources/) so the binary serves it from any working directory.
enum OpenAPIDocument {
    static let bytes: [UInt8] = PackageResources.openapi_yaml
}
