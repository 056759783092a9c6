package policy_test

import (
	"sort"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func awsSecret(services, regions []string) policy.SecretBinding {
	s := secret("aws", "AWS_ACCESS_KEY_ID", "env:AWS_CREDS", "bedrock-runtime.us-east-1.amazonaws.com")
	if services != nil {
		s.AWS = &policy.AWSCredential{Services: services, Regions: regions,
			SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}
	}
	return s
}

// TestCompareAWS checks that an AWS credential, and each service or
// region it signs for, widens when added and narrows when dropped.
func TestCompareAWS(t *testing.T) {
	type want struct {
		kind string
		dir  policy.Direction
	}
	cases := []struct {
		name     string
		old, new policy.SecretBinding
		want     []want
	}{
		{"becomes aws", awsSecret(nil, nil), awsSecret([]string{"bedrock"}, []string{"us-east-1"}),
			[]want{{"secret.aws", policy.Widen}, {"secret.aws.services", policy.Widen}, {"secret.aws.regions", policy.Widen}}},
		{"no longer aws", awsSecret([]string{"bedrock"}, []string{"us-east-1"}), awsSecret(nil, nil),
			// Its value is substituted as it is from now on: a widening too.
			[]want{{"secret.aws", policy.Narrow}, {"secret.aws", policy.Widen}}},
		{"service added", awsSecret([]string{"bedrock"}, []string{"us-east-1"}), awsSecret([]string{"bedrock", "s3"}, []string{"us-east-1"}),
			[]want{{"secret.aws.services", policy.Widen}}},
		{"region added", awsSecret([]string{"bedrock"}, []string{"us-east-1"}), awsSecret([]string{"bedrock"}, []string{"us-east-1", "eu-west-1"}),
			[]want{{"secret.aws.regions", policy.Widen}}},
		{"region dropped", awsSecret([]string{"bedrock"}, []string{"us-east-1", "eu-west-1"}), awsSecret([]string{"bedrock"}, []string{"us-east-1"}),
			[]want{{"secret.aws.regions", policy.Narrow}}},
		{"same", awsSecret([]string{"s3"}, []string{"us-east-1"}), awsSecret([]string{"s3"}, []string{"us-east-1"}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := policy.Compare(policy.Sandbox{Secrets: []policy.SecretBinding{c.old}}, policy.Sandbox{Secrets: []policy.SecretBinding{c.new}})
			var got []want
			for _, ch := range cs {
				got = append(got, want{ch.Kind, ch.Direction})
			}
			sort.Slice(got, func(i, j int) bool { return got[i].kind < got[j].kind })
			sort.Slice(c.want, func(i, j int) bool { return c.want[i].kind < c.want[j].kind })
			if len(got) != len(c.want) {
				t.Fatalf("changes = %+v, want %+v", cs, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("change %d = %+v, want %+v (%+v)", i, got[i], c.want[i], cs)
				}
			}
		})
	}
	// A new AWS secret is widening as a whole, and its services too.
	cs := policy.Compare(policy.Sandbox{}, policy.Sandbox{Secrets: []policy.SecretBinding{awsSecret([]string{"s3"}, []string{"us-east-1"})}})
	var aws bool
	for _, ch := range cs {
		if ch.Kind == "secret.aws" && ch.Direction == policy.Widen {
			aws = true
		}
	}
	if !aws {
		t.Errorf("a new AWS secret: %+v, want a widening secret.aws change", cs)
	}
}

func TestHashAWS(t *testing.T) {
	a := policy.Sandbox{Secrets: []policy.SecretBinding{awsSecret([]string{"s3"}, []string{"us-east-1"})}}
	b := policy.Sandbox{Secrets: []policy.SecretBinding{awsSecret([]string{"s3", "bedrock"}, []string{"us-east-1"})}}
	c := policy.Sandbox{Secrets: []policy.SecretBinding{awsSecret(nil, nil)}}
	ha, hb, hc := policy.Hash(a), policy.Hash(b), policy.Hash(c)
	if ha == hb || ha == hc {
		t.Errorf("hashes do not tell AWS declarations apart: %s %s %s", ha, hb, hc)
	}
}
