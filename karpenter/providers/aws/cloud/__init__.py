"""The AWS adapter: the only package that talks to the AWS SDK (aioboto3/botocore)."""
