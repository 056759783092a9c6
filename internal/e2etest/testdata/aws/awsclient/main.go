// Command awsclient is TestAWSSigV4InVM's guest program: aws-sdk-go-v2
// clients that take their credential from the environment (the
// placeholders sbx puts there) call STS GetCallerIdentity and S3
// PutObject at the fake service, then fetch a presigned S3 URL made with
// the same credential. It prints one line per step and what it was
// given, and exits 1 when a call that should succeed fails.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id, secret, token := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
	fmt.Printf("env AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_SESSION_TOKEN=%s\n", id, secret, token)
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, token),
		HTTPClient:  &http.Client{Timeout: 2 * time.Minute},
	}
	failed := false

	out, err := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String("https://sts.aws.test") }).
		GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		fmt.Printf("sts error %v\n", oneLine(err.Error()))
		failed = true
	} else {
		fmt.Printf("sts ok account=%s\n", aws.ToString(out.Account))
	}

	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("https://s3.aws.test")
		o.UsePathStyle = true
	})
	body := bytes.Repeat([]byte("from the sandbox\n"), 4096)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/object.txt"), Body: bytes.NewReader(body)}); err != nil {
		fmt.Printf("s3 error %v\n", oneLine(err.Error()))
		failed = true
	} else {
		fmt.Printf("s3 ok bytes=%d\n", len(body))
	}

	pre, err := s3.NewPresignClient(s3c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/object.txt")})
	if err != nil {
		fmt.Printf("presign error %v\n", oneLine(err.Error()))
		failed = true
	} else {
		res, err := http.Get(pre.URL)
		if err != nil {
			fmt.Printf("presigned error %v\n", oneLine(err.Error()))
			failed = true
		} else {
			msg, _ := io.ReadAll(res.Body)
			res.Body.Close()
			fmt.Printf("presigned status=%d %s\n", res.StatusCode, oneLine(string(msg)))
		}
	}
	if failed {
		os.Exit(1)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
