package lang

import "github.com/hashicorp/hcl/v2/hclwrite"

// Format returns src in canonical HCL layout (indentation, alignment of
// "=" signs, spacing), as sbx fmt writes it. It changes layout only, never
// meaning, and needs no valid configuration: a file with syntax errors is
// formatted as far as its tokens allow.
func Format(src []byte) []byte { return hclwrite.Format(src) }
