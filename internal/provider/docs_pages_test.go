package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// make generate runs tfplugindocs with the terraform on PATH, and Terraform
// before 1.14 (1.12 for identities) reports neither list resource nor action
// schemas, nor resource identities: tfplugindocs then copies their templates
// as they are instead of writing their schema sections. Those sections are
// therefore written by hand in the templates, and this test keeps them equal
// to the schemas.

// documented is a schema attribute as the generated docs list it.
type documented struct {
	name, typ, description string
}

// line is the attribute's line in a schema section, as tfplugindocs writes
// it.
func (d documented) line() string {
	return "- `" + d.name + "` (" + d.typ + ") " + d.description + "\n"
}

// docType is the type of an attribute as tfplugindocs names it.
func docType(t attr.Type) string {
	switch t {
	case types.StringType:
		return "String"
	case types.Int64Type:
		return "Number"
	}
	return t.String()
}

// describedTyped is what the attributes of list, action and identity
// schemas share.
type describedTyped interface {
	GetType() attr.Type
	GetDescription() string
	GetMarkdownDescription() string
}

func documentedAttributes[A describedTyped](attrs map[string]A) []documented {
	out := make([]documented, 0, len(attrs))
	for name, a := range attrs {
		desc := a.GetMarkdownDescription()
		if desc == "" {
			desc = a.GetDescription() // identity attributes have only a Description
		}
		out = append(out, documented{name: name, typ: docType(a.GetType()), description: desc})
	}
	return out
}

// checkPage checks that the template page documents the object: its
// description and a line per attribute.
func checkPage(t *testing.T, page, description string, attrs []documented) {
	t.Helper()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "templates", filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if description != "" && !strings.Contains(text, "\n"+description+"\n") {
		t.Errorf("templates/%s does not have the schema's description as a paragraph:\n%s", page, description)
	}
	for _, a := range attrs {
		if strings.TrimSpace(a.description) == "" {
			t.Errorf("%s: attribute %s has no description", page, a.name)
		}
		if n := strings.Count(text, a.line()); n > 1 {
			t.Errorf("templates/%s documents %s %d times", page, a.name, n)
		}
		if !strings.Contains(text, a.line()) {
			t.Errorf("templates/%s does not document %s as the schema does:\n%s", page, a.name, a.line())
		}
	}
}

func TestDocs_HandWrittenSchemaSections(t *testing.T) {
	ctx := t.Context()
	var ls list.ListResourceSchemaResponse
	NewLeaseListResource().ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &ls)
	checkPage(t, "list-resources/lease.md.tmpl", ls.Schema.MarkdownDescription, documentedAttributes(ls.Schema.Attributes))

	for _, f := range (&s3lockProvider{}).Actions(ctx) {
		a := f()
		var md action.MetadataResponse
		a.Metadata(ctx, action.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s action.SchemaResponse
		a.Schema(ctx, action.SchemaRequest{}, &s)
		page := "actions/" + strings.TrimPrefix(md.TypeName, "s3lock_") + ".md.tmpl"
		checkPage(t, page, s.Schema.MarkdownDescription, documentedAttributes(s.Schema.Attributes))
	}

	// tfplugindocs writes no page for a state store: its guide lists
	// the arguments.
	var ss statestore.SchemaResponse
	NewStateStore().Schema(ctx, statestore.SchemaRequest{}, &ss)
	checkPage(t, "guides/state-store.md.tmpl", "", documentedAttributes(ss.Schema.Attributes))

	var is resource.IdentitySchemaResponse
	(&leaseResource{}).IdentitySchema(ctx, resource.IdentitySchemaRequest{}, &is)
	checkPage(t, "resources/lease.md.tmpl", "", documentedAttributes(is.IdentitySchema.Attributes))
}
