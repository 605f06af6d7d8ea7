// Command pulumi-resource-kubernetes serves the Pulumi Kubernetes provider for `make e2e`.
//
// The provider module's own main embeds a schema that `go generate` writes and the module zip lacks,
// so this main serves the same provider package with the module's committed schema.json and
// terraform-mapping.json, which e2e/build.sh copies from the module cache into embed/ before building.
package main

import (
	_ "embed"
	"encoding/json"
	"log"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed embed/schema.json
var schema []byte

//go:embed embed/terraform-mapping.json
var terraformMapping []byte

func main() {
	// The release build stamps the provider version into the schema, as the module's generate.go does.
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(schema, &spec); err != nil {
		log.Fatalf("schema.json: %v", err)
	}
	v, err := json.Marshal(version.Version)
	if err != nil {
		log.Fatal(err)
	}
	spec["version"] = v
	stamped, err := json.Marshal(spec)
	if err != nil {
		log.Fatal(err)
	}
	provider.Serve("kubernetes", version.Version, stamped, terraformMapping)
}
