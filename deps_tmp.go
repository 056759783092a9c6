package sbx

import (
	_ "github.com/aymanbagabas/go-udiff"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/go-containerregistry/pkg/authn"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/layout"
	_ "github.com/google/go-containerregistry/pkg/v1/random"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/google/uuid"
	_ "github.com/hashicorp/hcl/v2"
	_ "github.com/hashicorp/hcl/v2/ext/typeexpr"
	_ "github.com/hashicorp/hcl/v2/hclparse"
	_ "github.com/hashicorp/hcl/v2/hclsyntax"
	_ "github.com/hashicorp/hcl/v2/hclwrite"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/zclconf/go-cty/cty"
	_ "github.com/zclconf/go-cty/cty/function/stdlib"
	_ "github.com/zclconf/go-cty/cty/json"
	_ "golang.org/x/term"
	_ "golang.org/x/tools/txtar"
)
